"""The ``exportMmdb`` state machine, executed: Export between WriteChunks and Activate.

The same offline interpreter and Lambda endpoint as ``test_state_machine.py``,
over the definition synthesized with ``exportMmdb`` on. A load exports its
version before activating it, and the change event names the file; a failing
export aborts the load while the previous version keeps serving.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import maxminddb
import pytest

from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from loader.pipeline.export_task import EXPORT_PREFIX
from loader.records import LoadStatus, load_id_of
from loader.store.table import LoaderTable
from tests.infra.conftest import EXPORT_MMDB
from tests.integration.state_machines import (
    BUCKET,
    EXECUTION,
    FIXTURE,
    Machine,
    localize,
    machine_of,
)

machine = machine_of(EXPORT_MMDB)


def _exports(machine: Machine) -> list[str]:
    listing = machine.endpoint.s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{EXPORT_PREFIX}/")
    return sorted(entry["Key"] for entry in listing.get("Contents", []))


def _activation_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    lines = [record.getMessage() for record in caplog.records if record.name == "loader.store.events"]
    return [json.loads(line.removeprefix("event ")) for line in lines]


def test_a_load_exports_its_version_before_activating_it_and_the_event_names_the_file(
    machine: Machine, table_environment: Settings, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="loader.store.events"):
        result = machine.run(localize(machine.definition), EXECUTION)

    assert result["status"] == "SUCCEEDED", result
    # The endpoint's calls, in the order each task first ran
    assert list(machine.endpoint.faults.calls)[-4:] == ["write_chunks", "export", "activate", "cleanup"]
    version = result["output"]["version"]
    key = f"{EXPORT_PREFIX}/{load_id_of(version, keys.DEFAULT_DATASET)}.mmdb"
    assert result["output"]["export"]["key"] == key
    assert _exports(machine) == [key]
    database = tmp_path / "exported.mmdb"
    machine.endpoint.s3.download_file(BUCKET, key, str(database))
    with maxminddb.open_database(str(database)) as reader:
        assert reader.get("1.0.4.1") == {"asn": 38803, "organization": "Gtelecom Pty Ltd", "country": "AU"}
    [event] = _activation_events(caplog)
    assert event["detail"]["version"] == load_id_of(version, keys.DEFAULT_DATASET)
    assert event["detail"]["export"]["key"] == key


def test_a_failing_export_aborts_the_load_and_the_previous_version_keeps_serving(
    machine: Machine, table_environment: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    # Given an active version, exported
    first = machine.run(localize(machine.definition), EXECUTION)
    assert first["status"] == "SUCCEEDED", first
    table = LoaderTable.from_settings(table_environment)
    active = table.lookup.read_active_version(consistent=True)
    # When a changed source loads and its export fails
    changed = FIXTURE.read_text(encoding="utf-8") + "192.0.2.0,192.0.2.255,64496,Documentation,ZZ\n"
    machine.endpoint.s3.put_object(Bucket=BUCKET, Key="in/small.csv", Body=changed.encode())
    machine.endpoint.faults.planned = {"export": [["MemoryError", -1]]}
    machine.endpoint.faults.calls.clear()
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="loader.store.events"):
        second = machine.run(localize(machine.definition), EXECUTION)

    # Then the load aborts before activation: the first version is still live, nothing announced
    assert second["status"] == "FAILED", second
    kinds = [(event["type"], event["state"]) for event in second["events"]]
    assert ("StateCaught", "Export") in kinds
    assert ("StateFailed", "LoadFailed") in kinds
    assert machine.endpoint.faults.calls.get("abort") == 1
    assert "activate" not in machine.endpoint.faults.calls
    assert table.lookup.read_active_version(consistent=True) == active
    failed = [load for load in table.loads.list_all() if load.version != active]
    assert [load.status for load in failed] == [LoadStatus.FAILED]
    assert table.lock.read() is None
    assert _exports(machine) == [f"{EXPORT_PREFIX}/{load_id_of(active or 0, keys.DEFAULT_DATASET)}.mmdb"]
    assert _activation_events(caplog) == []
