"""What ``ipmeta enrich`` costs on AWS (``stacks/enrich_workflow.py``), next to the same addresses
through the API (``ipmeta plan --enrich-rows N``).

A job of N addresses is cut into parts of ``ENRICH_PART_BYTES`` of input; each part is one child of
the Distributed Map, one Lambda invocation of ``ENRICH_PART_MEMORY_MB`` that reads its part and each
pinned version's snapshot from S3, sorts, merges and writes its output part. Its bill:

- **Lambda**: GB-seconds at the engine's measured throughput, and a request per part;
- **S3**: GETs of the input, of each snapshot by every part, of the parts list and results;
  PUTs of the output (multipart: one per ``S3_WRITE_PART_BYTES`` and two more), the parts list,
  the results and the summary; LISTs of the input;
- **Step Functions**: the parent's transitions and each child's (Standard);
- **the snapshot**: once per version, one eventually consistent read of the version's items
  and the Lambda time that writes it; a later job on the same version pays none of it.

Every assumption is a measurement in ``bench/results/enrich_task.json`` (``bench/enrich_task.py``
writes it; ``tests/unit/test_enrich_costs.py`` holds these constants to it). List prices of
us-east-1, as ``loader.planning.costs``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Final

from ipmeta.schema.settings import Front
from loader.planning.costs import (
    LAMBDA_PRICE_PER_GB_SECOND,
    LAMBDA_PRICE_PER_MILLION,
    READ_PRICE_PER_MILLION,
    READ_UNITS_PER_LOOKUP_READ,
    Batching,
    lookup_costs,
)
from loader.planning.write_model import ITEM_OVERHEAD_BYTES, KB, MILLION
from loader.settings import ENRICH_PART_BYTES, ENRICH_PART_MEMORY_MB

S3_GET_PRICE_PER_THOUSAND: Final = 0.0004
S3_PUT_PRICE_PER_THOUSAND: Final = 0.005
STEP_FUNCTIONS_PRICE_PER_THOUSAND: Final = 0.025
#: Bytes one ranged GET of a reader fetches (pyarrow's S3 reads: its buffer and CSV block size).
S3_READ_BLOCK_BYTES: Final = 8 << 20
#: An output part is a multipart upload of parts this large (plus its create and complete).
S3_WRITE_PART_BYTES: Final = 8 << 20
#: The parent's states (PlanEnrich, Snapshots, EnrichParts, Summarize, Enriched and their starts),
#: two per snapshot (its iteration and task), and each child's (its start and EnrichPart).
PARENT_TRANSITIONS: Final = 8
TRANSITIONS_PER_SNAPSHOT: Final = 2
TRANSITIONS_PER_CHILD: Final = 2
#: The API batch sizes the comparison prices: the typical client's, and the largest batch.
API_BATCH_SIZES: Final = (100, 1000)


@dataclass(frozen=True)
class EnrichMeasurements:
    """What the model assumes, each measured by ``bench/enrich_task.py`` through the task code."""

    #: Addresses per second of one part on one core, read, sorted, merged and written (CSV).
    rows_per_second: float = 1.0
    #: Bytes of input and of output per address (a CSV access log's address column, and the
    #: same rows annotated with the demo datasets' fields).
    input_bytes_per_row: float = 16.0
    output_bytes_per_row: float = 120.0
    #: The snapshot of the demo's versions: its ranges, their bytes in the table (what one
    #: eventually consistent read of the version pays for), the Parquet's bytes, and the
    #: seconds of one core that read the version and wrote it.
    snapshot_ranges: int = 0
    snapshot_table_bytes: float = 0.0
    snapshot_file_bytes: float = 0.0
    snapshot_seconds: float = 0.0
    #: Where the figures come from.
    source: str = ""


#: ``bench/results/enrich_task.json`` (``python -m bench.enrich_task``): 2,000,000 addresses (80% IPv4)
#: through the EnrichPart task's code on one core of this 2-core machine, against the ASN dataset's
#: snapshot (515,199 ranges) that the Snapshot task's code wrote from dynalite.
MEASURED: Final = EnrichMeasurements(
    rows_per_second=880265.3,
    input_bytes_per_row=21.312,
    output_bytes_per_row=84.237,
    snapshot_ranges=515199,
    snapshot_table_bytes=59709297.0,
    snapshot_file_bytes=13584193,
    snapshot_seconds=50.278,
    source="bench/results/enrich_task.json (python -m bench.enrich_task)",
)


def _s3_requests(rows: int, parts: int, snapshots: int, m: EnrichMeasurements) -> tuple[int, int]:
    """(GETs, PUTs and LISTs) of one job."""
    input_bytes = rows * m.input_bytes_per_row
    output_bytes = rows * m.output_bytes_per_row
    input_gets = math.ceil(input_bytes / S3_READ_BLOCK_BYTES) + parts
    snapshot_gets = parts * snapshots * max(1, math.ceil(m.snapshot_file_bytes / S3_READ_BLOCK_BYTES))
    bookkeeping_gets = 1 + 2  # the parts list (the ItemReader), the results manifest and its file
    output_puts = math.ceil(output_bytes / S3_WRITE_PART_BYTES) + 2 * parts
    # The parts list, the ResultWriter's manifest and file, the summary; a LIST per 1,000 objects.
    bookkeeping_puts = 4 + math.ceil(parts / 1000)
    return input_gets + snapshot_gets + bookkeeping_gets, output_puts + bookkeeping_puts


def snapshot_costs(m: EnrichMeasurements, memory_mb: int = ENRICH_PART_MEMORY_MB) -> dict[str, Any]:
    """A version's snapshot, written once: one read of its items, the Lambda that writes it, one PUT."""
    read_units = math.ceil(
        (m.snapshot_table_bytes + m.snapshot_ranges * ITEM_OVERHEAD_BYTES) / 4096 * READ_UNITS_PER_LOOKUP_READ
    )
    lambda_usd = m.snapshot_seconds * memory_mb / KB * LAMBDA_PRICE_PER_GB_SECOND
    breakdown = {
        "table_reads": read_units / MILLION * READ_PRICE_PER_MILLION,
        "lambda": lambda_usd,
        "s3": (2 + math.ceil(m.snapshot_file_bytes / S3_WRITE_PART_BYTES)) / 1000 * S3_PUT_PRICE_PER_THOUSAND,
    }
    return {
        "ranges": m.snapshot_ranges,
        "read_units": read_units,
        "breakdown": {line: round(usd, 6) for line, usd in breakdown.items()},
        "total": round(sum(breakdown.values()), 6),
    }


def enrich_costs(
    rows: int,
    m: EnrichMeasurements,
    *,
    datasets: int = 1,
    part_bytes: int = ENRICH_PART_BYTES,
    memory_mb: int = ENRICH_PART_MEMORY_MB,
    first_job_on_the_version: bool = True,
) -> dict[str, Any]:
    """The bill of one job of ``rows`` addresses against ``datasets`` pinned versions."""
    parts = max(1, math.ceil(rows * m.input_bytes_per_row / part_bytes))
    seconds = rows / m.rows_per_second
    gb_seconds = seconds * memory_mb / KB
    gets, puts = _s3_requests(rows, parts, datasets, m)
    transitions = PARENT_TRANSITIONS + TRANSITIONS_PER_SNAPSHOT * datasets + TRANSITIONS_PER_CHILD * parts
    snapshot = snapshot_costs(m, memory_mb)
    breakdown = {
        "lambda_duration": gb_seconds * LAMBDA_PRICE_PER_GB_SECOND,
        "lambda_requests": (parts + 3 + datasets) / MILLION * LAMBDA_PRICE_PER_MILLION,
        "s3_gets": gets / 1000 * S3_GET_PRICE_PER_THOUSAND,
        "s3_puts": puts / 1000 * S3_PUT_PRICE_PER_THOUSAND,
        "step_functions": transitions / 1000 * STEP_FUNCTIONS_PRICE_PER_THOUSAND,
        "snapshot": snapshot["total"] * datasets if first_job_on_the_version else 0.0,
    }
    total = sum(breakdown.values())
    return {
        "rows": rows,
        "parts": parts,
        "lambda_seconds": round(seconds, 2),
        "gb_seconds": round(gb_seconds, 2),
        "s3_gets": gets,
        "s3_puts": puts,
        "transitions": transitions,
        "snapshot": snapshot,
        "breakdown": {line: round(usd, 6) for line, usd in breakdown.items()},
        "total": round(total, 6),
        "per_100_million": round(total / rows * 100 * MILLION, 6),
        "assumptions": asdict(m) | {"memory_mb": memory_mb, "part_bytes": part_bytes, "datasets": datasets},
    }


def api_costs(rows: int, **assumptions: Any) -> dict[str, Any]:
    """The same addresses through the API, single and batched: each front's bill (``lookup_costs``)."""
    ways = {"single": Batching()} | {f"batches of {size:,}": Batching(1.0, size) for size in API_BATCH_SIZES}
    found = {}
    for name, batching in ways.items():
        fronts = lookup_costs(rows, batching=batching, **assumptions)["fronts"]
        found[name] = {str(front): fronts[str(front)]["total"] for front in Front}
    return found
