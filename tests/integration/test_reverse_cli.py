"""`ipmeta ranges` and `ipmeta flagged` follow every page and print one JSON answer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipmeta.schema.settings import Settings
from ipmeta_cli.main import main
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable

SOURCE = """start,end,asn,rule
1.0.0.0,1.0.0.255,13335,
2.0.0.0,2.0.0.255,64500,block
3.0.0.0,3.0.0.255,13335,
2001:db8::,2001:db8::ff,13335,
4.0.0.0,4.0.0.255,64501,
"""


def test_ranges_and_flagged_list_every_page(
    store: LoaderTable,
    table_environment: Settings,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    source = tmp_path / "ranges.csv"
    source.write_text(SOURCE)
    options = LoadOptions(index_field="asn", flag_column="rule")
    driver.run_load([source], options, store, LocalStaging(tmp_path / "staging"))

    assert main(["ranges", "--field", "asn", "--value", "13335", "--limit", "1"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["count"] == 3
    assert [(entry["start"], entry["end"]) for entry in listed["ranges"]] == [
        ("1.0.0.0", "1.0.0.255"),
        ("3.0.0.0", "3.0.0.255"),
        ("2001:db8::", "2001:db8::ff"),
    ]

    assert main(["flagged", "--limit", "1"]) == 0
    flagged = json.loads(capsys.readouterr().out)
    assert [entry["start"] for entry in flagged["ranges"]] == ["2.0.0.0"]

    assert main(["ranges", "--field", "organization", "--value", "x"]) == 2
    assert "FIELD_NOT_INDEXED" in capsys.readouterr().err
