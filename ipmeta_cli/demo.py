"""The demo that `make run` serves: two datasets from registry packages, loaded once, answered together.

- ``asn``: ``@ip-location-db/asn`` (CC BY 4.0), every announced range with its AS
  number and organization, indexed by ``asn`` (``GET /v1/ranges?field=asn&value=13335``);
- ``cloud``: Cloudflare's published ranges from ``cloudflare-ip`` (MIT), a small
  list of our own making: one ``cloud_provider`` column, flagged
  (``GET /v1/flagged?dataset=cloud``).

A Cloudflare address (``104.16.132.229``) answers from both: one lookup, two
datasets, one merged view. The benchmarks load the same ASN files, so their
figures and the demo's agree.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ipmeta_cli.dynalite import PROJECT_ROOT

if TYPE_CHECKING:
    from loader.options import LoadOptions

ASN_DATASET = "asn"
ASN_DIR = PROJECT_ROOT / "node_modules" / "@ip-location-db" / "asn"
ASN_FILES = (ASN_DIR / "asn-ipv4.csv", ASN_DIR / "asn-ipv6.csv")
ASN_COLUMNS = ("start", "end", "asn", "organization")
#: The demo indexes the ASN data by ASN, so `GET /v1/ranges?field=asn&value=13335` answers.
ASN_INDEX_FIELD = "asn"
ASN_ATTRIBUTION = (
    "ASN data: @ip-location-db/asn (CC BY 4.0), from RouteViews, DB-IP and the NRO; "
    "see node_modules/@ip-location-db/asn/README.md"
)

CLOUD_DATASET = "cloud"
CLOUD_PACKAGE = PROJECT_ROOT / "node_modules" / "cloudflare-ip"
CLOUD_COLUMN = "cloud_provider"
CLOUD_ATTRIBUTION = "Cloud ranges: Cloudflare's, from cloudflare-ip (MIT); see node_modules/cloudflare-ip"


def asn_options() -> LoadOptions:
    """How `make run` (and the benchmarks, which share its store) load the ASN files."""
    from loader.options import LoadOptions

    return LoadOptions(dataset=ASN_DATASET, columns=ASN_COLUMNS, index_field=ASN_INDEX_FIELD)


def cloud_options() -> LoadOptions:
    from loader.options import LoadOptions

    return LoadOptions(dataset=CLOUD_DATASET, flag_column=CLOUD_COLUMN)


def write_cloud_csv(out: Path, package: Path = CLOUD_PACKAGE) -> Path:
    """The package's CIDR list as a range CSV: ``network,cloud_provider``; rewritten only when it changes.

    Kept byte-identical between runs, so a second `make run` finds the loaded version unchanged.
    """
    networks: list[str] = json.loads((package / "ips.json").read_text(encoding="utf-8"))
    rows = [["network", CLOUD_COLUMN], *([network, "cloudflare"] for network in networks)]
    text = "".join(",".join(row) + "\n" for row in rows)
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.parent.mkdir(parents=True, exist_ok=True)
        with out.open("w", newline="", encoding="utf-8") as handle:
            csv.writer(handle, lineterminator="\n").writerows(rows)
    return out


@dataclass(frozen=True)
class DemoDataset:
    name: str
    files: Sequence[Path]
    options: LoadOptions
    attribution: str


def demo_datasets(data_dir: Path) -> list[DemoDataset]:
    """What `make run` loads, the cloud list first built under ``data_dir``."""
    cloud = write_cloud_csv(data_dir / "demo" / "cloud-ranges.csv")
    return [
        DemoDataset(ASN_DATASET, ASN_FILES, asn_options(), ASN_ATTRIBUTION),
        DemoDataset(CLOUD_DATASET, (cloud,), cloud_options(), CLOUD_ATTRIBUTION),
    ]
