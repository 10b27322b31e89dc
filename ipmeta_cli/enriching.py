"""`ipmeta enrich`: every row of a file of addresses annotated with the API's answer, by a sort-merge.

The versions are pinned at the start, as the API picks them for a request
(``ipmeta.lookup.catalog.select_targets``: ``--datasets``, ``--version``), so a
reload that activates midway changes nothing. Each pinned version is read from
the table once, into its Parquet snapshot (``loader.export.snapshots``), or
given ready with ``--snapshot``; then ``loader.enrich.enrich_part`` streams the
file. A report, ``OUTPUT.ipmeta.json``, records the versions and the counts
(Parquet outputs also carry the versions in their footer).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ipmeta_cli.arguments import dataset_names
from ipmeta_cli.backend import add_backend_arguments, backend
from ipmeta_cli.enrich_jobs import add_job_arguments

if TYPE_CHECKING:
    from loader.enrich.job import EnrichSummary
    from loader.enrich.snapshot import DatasetSnapshot, Snapshot

#: Exit codes: every row answered; the job finished but some rows are invalid; the job was refused.
ALL_ROWS, SOME_INVALID, REFUSED = 0, 1, 2


def command_enrich(args: argparse.Namespace) -> int:
    if args.stack:  # on AWS, by the stack's enrich state machine
        from ipmeta_cli.enrich_jobs import command_enrich_job

        return command_enrich_job(args)
    from ipmeta.schema.errors import IpmetaError
    from loader.enrich.job import Output, enrich_part
    from loader.enrich.memory import tune_allocators
    from loader.enrich.parts import EnrichInputError, Part
    from loader.export.parquet import resolve

    tune_allocators()  # before the snapshot's load, whose arrays come from the same heap
    part = Part(args.input, column=args.column, format=args.input_format)
    try:
        output = Output(args.out, args.format or _named_format(args.out) or part.kind, args.overwrite)
        output.refuse_existing()  # before the versions are read: that may take a while
        with _snapshot(args) as snapshot, _progress(args.input) as progress:
            summary = enrich_part(part, snapshot, output, chunk_rows=args.chunk_rows, progress=progress)
    except (EnrichInputError, IpmetaError, FileNotFoundError) as error:
        print(f"ipmeta enrich: {error}", file=sys.stderr)
        return REFUSED
    report = {"input": args.input, "out": args.out, **summary.to_dict()}
    fs, path = resolve(f"{args.out}.ipmeta.json")
    with fs.open_output_stream(path) as sink:
        sink.write(json.dumps(report, indent=2).encode())
    print(json.dumps(report, indent=2) if args.json else _describe(summary, args.out))
    return SOME_INVALID if summary.invalid_rows else ALL_ROWS


def _named_format(name: str) -> str | None:
    from loader.enrich.parts import EnrichInputError, format_of

    try:
        return format_of(name)
    except EnrichInputError:
        return None


@contextmanager
def _snapshot(args: argparse.Namespace) -> Iterator[Snapshot]:
    from loader.enrich.snapshot import Snapshot, load_dataset_snapshot

    if args.snapshot:
        loaded = [load_dataset_snapshot(path) for path in args.snapshot]
        yield Snapshot(tuple(_chosen(loaded, args.datasets, args.version)))
        return
    with tempfile.TemporaryDirectory(prefix="ipmeta-enrich-") as workdir:
        yield Snapshot(tuple(_from_table(args, Path(workdir))))


def _from_table(args: argparse.Namespace, workdir: Path) -> list[DatasetSnapshot]:
    """Each target the API would read, pinned now and exported once into ``workdir``."""
    from ipmeta.lookup.catalog import DatasetCatalog, select_targets
    from ipmeta.schema.settings import ApiSettings
    from loader.enrich.snapshot import load_dataset_snapshot
    from loader.export.snapshots import export_snapshot
    from loader.store.table import LoaderTable

    loaded = []
    with backend(args) as settings:
        table = LoaderTable.from_settings(settings)
        store = table.lookup
        catalog = DatasetCatalog(store, 0, ApiSettings.from_environment().datasets)
        targets = select_targets(catalog.get(), store.for_dataset, args.datasets, args.version)
        for target in targets.versions:
            dataset = table.for_dataset(target.dataset)
            meta = dataset.lookup.get_version_meta(target.version)
            assert meta is not None  # select_targets has just read it, or the pointer names it
            out = str(workdir / f"{target.dataset}.parquet")
            export_snapshot(dataset, meta, out)
            loaded.append(load_dataset_snapshot(out))
    return loaded


def _chosen(
    loaded: Sequence[DatasetSnapshot], datasets: str | None, version: str | None
) -> list[DatasetSnapshot]:
    """The given snapshots the request names (all, in the order given, by default), versions checked."""
    from ipmeta.lookup.catalog import parse_dataset_names, parse_version_selector
    from ipmeta.schema.errors import DatasetNotFound, VersionNotFound

    known = {each.dataset: each for each in loaded}
    wanted = parse_dataset_names(datasets)
    unknown = sorted(set(wanted or ()) - set(known))
    if unknown:
        raise DatasetNotFound(f"no snapshot of {', '.join(unknown)} was given (--snapshot)")
    chosen = [each for each in loaded if wanted is None or each.dataset in wanted]
    for name, number in parse_version_selector(version, [each.dataset for each in chosen]).items():
        if known[name].info.version != number:
            raise VersionNotFound(f"the snapshot of {name} holds v{known[name].info.version}, not v{number}")
    return chosen


@contextmanager
def _progress(name: str) -> Iterator[Any]:
    from tqdm import tqdm

    with tqdm(unit=" rows", unit_scale=True, desc=f"enrich {Path(name).name}", leave=False) as bar:
        yield bar.update


def _describe(summary: EnrichSummary, out: str) -> str:
    versions = ", ".join(f"{name} {version}" for name, version in summary.versions.items())
    lines = [
        f"enriched {summary.rows:,} rows into {out} in {summary.seconds}s ({versions}): "
        f"{summary.invalid_rows:,} invalid, {summary.unmatched_rows:,} in no range",
        *(f"  row {row}: {message}" for row, message in summary.problems),
        f"  report: {out}.ipmeta.json",
    ]
    return "\n".join(lines)


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from loader.enrich.job import DEFAULT_CHUNK_ROWS
    from loader.enrich.parts import FORMATS

    enrich = commands.add_parser(
        "enrich",
        help="annotate a file of addresses (CSV, JSON Lines, Parquet) with the API's answers",
        description="Exit status: 0 every row valid, 1 some rows invalid (see ip_error), 2 refused.",
    )
    add_backend_arguments(enrich)
    enrich.add_argument(
        "input", metavar="INPUT", help="a file or s3://bucket/key (.csv, .jsonl, .parquet; .gz)"
    )
    enrich.add_argument("--out", required=True, help="the file to write (refused if it exists)")
    enrich.add_argument("--column", default="ip", help="the address column, or its 0-based index (no header)")
    enrich.add_argument("--datasets", type=dataset_names, help="e.g. city,asn (default: as the API)")
    enrich.add_argument("--version", help="pinned versions: v3 with one dataset, else city:v3,asn:v12")
    enrich.add_argument("--snapshot", action="append", help="a dataset's Parquet export to read instead")
    enrich.add_argument("--format", choices=FORMATS, help="the output's format (default: the input's)")
    enrich.add_argument("--input-format", choices=FORMATS, help="the input's (default: from its name)")
    enrich.add_argument("--overwrite", action="store_true", help="replace OUTPUT if it exists")
    enrich.add_argument("--chunk-rows", type=int, default=DEFAULT_CHUNK_ROWS, help=argparse.SUPPRESS)
    enrich.add_argument("--json", action="store_true", help="print the report as JSON")
    add_job_arguments(enrich)
    enrich.set_defaults(run=command_enrich)
