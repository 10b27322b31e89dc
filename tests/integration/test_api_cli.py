"""`ipmeta lookup`: several IPs as one batch, locally and against a served API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.api.handler import handler
from ipmeta.schema.settings import Front, Settings
from ipmeta_cli.main import main
from ipmeta_cli.server import LocalApiServer
from loader.store.table import LoaderTable
from tests.integration.conftest import load_csv

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"


@pytest.fixture
def loaded_store(store: LoaderTable, table_settings: Settings, tmp_path: Path) -> LoaderTable:
    load_csv(store, [FIXTURE], tmp_path)
    return store


@pytest.fixture
def recording_server(loaded_store: LoaderTable) -> Iterator[tuple[LocalApiServer, list[dict[str, Any]]]]:
    """The real handler behind HTTP, remembering each event (to see the headers sent)."""
    events: list[dict[str, Any]] = []

    def recording_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        events.append(event)
        response: dict[str, Any] = handler(event, context)
        return response

    dependencies.install(dependencies.Dependencies(store=loaded_store.lookup, pointer_cache_seconds=0.0))
    server = LocalApiServer("127.0.0.1", 0, recording_handler, front=Front.REST)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server, events
    server.shutdown()
    server.server_close()
    dependencies.install(None)


def test_lookup_sends_several_ips_as_one_batch_to_an_endpoint(
    recording_server: tuple[LocalApiServer, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    server, events = recording_server
    argv = ["lookup", "1.0.0.1", "2001:200::1", "--fields", "asn", "--endpoint", server.url + "/"]
    code = main([*argv, "--api-key", "k3y"])
    answers = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {ip: answer["data"] for ip, answer in answers.items()} == {
        "1.0.0.1": {"asn": 13335},
        "2001:200::1": {"asn": 2500},
    }
    assert [(event["httpMethod"], event["path"]) for event in events] == [("POST", "/v1/batch")]
    sent = {name.lower(): value for name, value in events[0]["headers"].items()}
    assert sent["x-api-key"] == "k3y"


@pytest.mark.parametrize("source", ["environment", "file"])
def test_lookup_reads_the_key_from_the_environment_or_a_file_off_the_command_line(
    recording_server: tuple[LocalApiServer, list[dict[str, Any]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    source: str,
) -> None:
    # Given the key where `ps` cannot show it: IPMETA_API_KEY, or a file with a comment line
    server, events = recording_server
    argv = ["lookup", "1.0.0.1", "--endpoint", server.url]
    if source == "environment":
        monkeypatch.setenv("IPMETA_API_KEY", "k3y-from-env")
    else:
        key_file = tmp_path / "key"
        key_file.write_text("# ipmeta\nk3y-from-file\n")
        argv += ["--api-key-file", str(key_file)]
    # When a lookup goes to the endpoint
    assert main(argv) == 0
    capsys.readouterr()
    # Then the key is sent, though no argument held it
    sent = {name.lower(): value for name, value in events[0]["headers"].items()}
    assert sent["x-api-key"] == f"k3y-from-{'env' if source == 'environment' else 'file'}"


@pytest.mark.parametrize(
    ("content", "reason"),
    [(None, "cannot read"), ("\n# only a comment\n", "holds no key"), ("a\nb\n", "several keys")],
    ids=["missing", "empty", "two-keys"],
)
def test_a_key_file_that_holds_no_single_key_stops_the_lookup(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, reason: str
) -> None:
    key_file = tmp_path / "key"
    if content is not None:
        key_file.write_text(content)
    # A bad file stops argument parsing (exit 2); two keys stop the request (exit 2 too)
    try:
        code = main(
            ["lookup", "1.0.0.1", "--endpoint", "http://127.0.0.1:9", "--api-key-file", str(key_file)]
        )
    except SystemExit as stopped:
        code = int(stopped.code or 0)
    assert code == 2
    assert reason in capsys.readouterr().err


def test_lookup_exit_status_says_some_ips_failed(
    recording_server: tuple[LocalApiServer, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    server, _ = recording_server
    code = main(["lookup", "1.0.0.1", "nope", "--endpoint", server.url])
    answers = json.loads(capsys.readouterr().out)
    assert code == 1
    assert answers["nope"]["error"]["code"] == "IP_ADDRESS_INVALID"


def test_lookup_on_a_table_without_a_server(
    loaded_store: LoaderTable,
    table_environment: Settings,
    capsys: pytest.CaptureFixture[str],
) -> None:
    dependencies.install(None)
    try:
        code = main(["lookup", "1.0.0.1", "10.0.0.150"])
    finally:
        dependencies.install(None)
    answers = json.loads(capsys.readouterr().out)
    assert code == 0
    assert answers["10.0.0.150"]["data"]["asn"] == 64502
    assert answers["10.0.0.150"]["bogon"] is True
