"""Running dynalite, the local DynamoDB, as a child process that cannot outlive us."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

PROJECT_ROOT = Path(__file__).resolve().parents[1]
DYNALITE_CLI = PROJECT_ROOT / "node_modules" / "dynalite" / "cli.js"
# Our launcher of dynalite: its cli.js, but a client killed mid-request cannot stop it.
DYNALITE_SERVER = Path(__file__).with_name("dynalite_server.js")
_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def die_with_parent() -> None:
    """Ask the kernel to SIGTERM this (child) process when its parent dies, so even
    a SIGKILLed `ipmeta serve` leaves no orphan dynalite or worker behind."""
    # Not Linux: no prctl, and the context manager still stops dynalite on a clean exit.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return True
    except OSError:
        return False


class Dynalite:
    """``with Dynalite(path=...) as endpoint:``; in memory when ``path`` is None."""

    def __init__(self, *, path: Path | None = None, port: int = 0) -> None:
        self.path = path
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> str:
        if not DYNALITE_CLI.exists():
            raise RuntimeError(f"{DYNALITE_CLI} is missing: run `npm ci` (or `make setup`) first")
        options: dict[str, str | int] = {"host": "127.0.0.1", "port": self.port}
        # Table lifecycle delays only slow tests down; DynamoDB's own are simulated by waiters.
        options |= {"createTableMs": 0, "deleteTableMs": 0, "updateTableMs": 0}
        if self.path is not None:
            self.path.mkdir(parents=True, exist_ok=True)
            options["path"] = str(self.path)
        command = ["node", str(DYNALITE_SERVER), json.dumps(options)]
        # A file, not a pipe: nobody drains a pipe while dynalite runs for hours.
        self._stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the process
        # preexec_fn only calls prctl before exec, which is safe even with threads around.
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=self._stderr,
            preexec_fn=die_with_parent,  # noqa: PLW1509
        )
        deadline = time.monotonic() + 15
        while not port_open(self.port):
            if self.process.poll() is not None:
                self._stderr.seek(0)
                error = self._stderr.read().decode(errors="replace")
                raise RuntimeError(f"dynalite exited with {self.process.returncode}: {error.strip()}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"dynalite did not listen on port {self.port} within 15 s")
            time.sleep(0.05)
        return self.endpoint

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


class SharedLocalStore:
    """The local store under ``.data/``, shared by `serve`, `load` and `lookup`.

    dynalite's LevelDB can be opened by one process at a time, so whoever starts
    it records its endpoint in a file; a later command reuses that endpoint when
    the process is alive, and otherwise starts its own dynalite on the same path.

    The owner stops dynalite when it exits, so a long-lived command (`serve`)
    never borrows from a short-lived one (a `load`): it waits for that owner to
    finish and then starts its own, rather than lose its database mid-serving.
    """

    def __init__(
        self, data_dir: Path, *, port: int = 0, long_lived: bool = False, wait_seconds: float = 3600
    ) -> None:
        self.data_dir = data_dir
        self.port = port
        self.long_lived = long_lived
        self.wait_seconds = wait_seconds
        self.record = data_dir / "dynalite.json"
        self._owned: Dynalite | None = None

    def _running_record(self) -> dict[str, object] | None:
        try:
            record = json.loads(self.record.read_text())
            os.kill(int(record["pid"]), 0)
        except (OSError, ValueError, KeyError):
            return None
        return dict(record) if port_open(int(record["port"])) else None

    def __enter__(self) -> str:
        record = self._running_record()
        if record is not None and self.long_lived and not record.get("long_lived"):
            print(
                f"waiting for the running ipmeta command (pid {record['pid']}) to finish...",
                file=sys.stderr,
                flush=True,
            )
            deadline = time.monotonic() + self.wait_seconds
            while record is not None and time.monotonic() < deadline:
                time.sleep(0.5)
                record = self._running_record()
        if record is not None:
            return str(record["endpoint"])
        self._owned = Dynalite(path=self.data_dir / "dynamodb", port=self.port)
        endpoint = self._owned.start()
        record = {
            "pid": os.getpid(),
            "port": self._owned.port,
            "endpoint": endpoint,
            "long_lived": self.long_lived,
        }
        self.record.write_text(json.dumps(record))
        return endpoint

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._owned is not None:
            self._owned.stop()
            self.record.unlink(missing_ok=True)
            self._owned = None
