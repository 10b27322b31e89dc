"""`ipmeta serve` as a user runs it: its own process, workers, and nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import IO

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Settings
from ipmeta_cli.dynalite import free_port, port_open
from loader.store.table import LoaderTable
from tests.integration.conftest import load_csv

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"


def children_of(pid: int) -> set[int]:
    found = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.add(int(entry))
    return found


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def wait_until(condition: object, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.1)
    return False


def start_serve(
    port: int, env: dict[str, str], *extra: str, stderr: IO[bytes] | int = subprocess.DEVNULL
) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "ipmeta_cli.main", "serve", "--port", str(port), *extra]
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=stderr)
    assert wait_until(lambda: port_open(port) or process.poll() is not None, 30), "serve did not start"
    assert process.poll() is None, "serve exited"
    return process


def test_workers_answer_and_die_with_a_killed_server(
    store: LoaderTable, table_settings: Settings, tmp_path: Path
) -> None:
    load_csv(store, [FIXTURE], tmp_path)
    port = free_port()
    env = {
        **os.environ,
        ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint),
        ENV_TABLE_NAME: table_settings.table_name,
    }
    server = start_serve(port, env, "--workers", "2")
    try:
        assert wait_until(lambda: len(children_of(server.pid)) == 2)
        workers = children_of(server.pid)
        for _ in range(6):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/ip/1.0.0.1", timeout=10) as response:
                assert json.loads(response.read())["data"]["asn"] == 13335
        server.send_signal(signal.SIGKILL)
        server.wait()
        assert wait_until(lambda: not any(alive(pid) for pid in workers)), "a worker outlived serve"
    finally:
        if server.poll() is None:
            server.kill()


def test_serve_prints_the_lookup_metrics_line_on_stderr_when_its_workers_stop(
    store: LoaderTable, table_settings: Settings, tmp_path: Path
) -> None:
    # Given `ipmeta serve` as a user starts it: metrics on (the tests turn them off for themselves)
    load_csv(store, [FIXTURE], tmp_path)
    port = free_port()
    env = {
        **{name: value for name, value in os.environ.items() if name != "POWERTOOLS_METRICS_DISABLED"},
        ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint),
        ENV_TABLE_NAME: table_settings.table_name,
    }
    errors = tmp_path / "stderr"
    with errors.open("wb") as stderr:
        server = start_serve(port, env, "--workers", "2", stderr=stderr)
        try:
            assert wait_until(lambda: len(children_of(server.pid)) == 2)
            workers = children_of(server.pid)
            # When it answers six lookups (no minute is up yet: no line) and is stopped
            for _ in range(6):
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/ip/1.0.0.1", timeout=10) as answer:
                    assert answer.status == 200
            server.send_signal(signal.SIGTERM)
            server.wait()
            assert wait_until(lambda: not any(alive(pid) for pid in workers)), "a worker outlived serve"
        finally:
            if server.poll() is None:
                server.kill()
    # Then each worker left its counts on stderr as the metrics line Lambda would print
    lines = [json.loads(line) for line in errors.read_text().splitlines() if line.startswith('{"_aws"')]
    assert 1 <= len(lines) <= 2
    assert sum(value for line in lines for value in line["Lookups"]) == 6
    assert sum(value for line in lines for value in line["Answers2xx"]) == 6


def test_a_killed_server_leaves_no_local_dynamodb(tmp_path: Path) -> None:
    port = free_port()
    env = {name: value for name, value in os.environ.items() if name != ENV_DYNAMODB_ENDPOINT}
    server = start_serve(port, env, "--workers", "1", "--data-dir", str(tmp_path / "data"))
    try:
        dynalite = [
            pid for pid in children_of(server.pid) if b"dynalite" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(dynalite) == 1
        server.send_signal(signal.SIGKILL)
        server.wait()
        assert wait_until(lambda: not alive(dynalite[0])), "dynalite outlived serve"
    finally:
        if server.poll() is None:
            server.kill()


def test_serve_never_borrows_a_dynalite_that_a_load_will_stop(tmp_path: Path) -> None:
    """Given a short-lived command owning the local store, a long-lived one waits and starts its own."""
    from ipmeta_cli.dynalite import SharedLocalStore

    data = tmp_path / "data"
    with SharedLocalStore(data) as borrowed:  # the `load`
        waiting = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "import sys; from pathlib import Path; from ipmeta_cli.dynalite import SharedLocalStore\n"
                f"with SharedLocalStore(Path({str(data)!r}), long_lived=True) as endpoint: print(endpoint)",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        time.sleep(1.5)
        assert waiting.poll() is None, "serve must wait while the load owns the store"
    out, _ = waiting.communicate(timeout=30)
    assert waiting.returncode == 0
    assert out.strip().startswith("http://127.0.0.1:")
    assert out.strip() != borrowed


def test_each_front_enforces_its_key_in_forked_workers(
    store: LoaderTable, table_settings: Settings, tmp_path: Path
) -> None:
    # Given `ipmeta serve` for each front, with a key from the environment and two workers
    load_csv(store, [FIXTURE], tmp_path)
    env = {
        **os.environ,
        ENV_DYNAMODB_ENDPOINT: str(table_settings.dynamodb_endpoint),
        ENV_TABLE_NAME: table_settings.table_name,
        "IPMETA_API_KEY": "serve-process-k3y",
    }
    for front in ("url", "rest", "http"):
        port = free_port()
        server = start_serve(port, env, "--workers", "2", "--front", front)
        try:
            # Then every worker refuses a request without the key, and answers one with it
            for key in (None, "serve-process-k3y") * 3:
                request = urllib.request.Request(
                    f"http://127.0.0.1:{port}/v1/ip/1.0.0.1", headers={"x-api-key": key} if key else {}
                )
                try:
                    with urllib.request.urlopen(request, timeout=10) as response:
                        status, body = response.status, json.loads(response.read())
                except urllib.error.HTTPError as error:
                    status, body = error.code, json.loads(error.read())
                if key is None:
                    assert (status, body["code"]) == (401, "AUTHORIZATION_INVALID"), front
                else:
                    assert (status, body["data"]["asn"]) == (200, 13335), front
        finally:
            server.kill()
            server.wait()
