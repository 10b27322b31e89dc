"""HTTP/1.1 over a raw socket, as an attacker writes it: bytes out, answers parsed as they come back.

``http.client`` refuses to send most of what these tests send (two Content-Lengths, a
bare CR, HTTP/0.9), and reads ahead past one answer, so pipelined answers are parsed here.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: What a refusal's Server header says: no ``BaseHTTP/…`` and no Python version.
SERVER_NAME = "ipmeta-local"


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]  #: lower-case names
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def connect(address: tuple[str, int], timeout: float = 5.0) -> socket.socket:
    connection = socket.create_connection(address, timeout=timeout)
    connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return connection


def read_answers(connection: socket.socket, count: int, *, head: bool = False) -> list[Answer]:
    """Up to ``count`` answers (fewer when the server closes first); interim 1xx answers count too."""
    reader = connection.makefile("rb")
    answers: list[Answer] = []
    try:
        while len(answers) < count:
            status_line = reader.readline(65_536)
            if not status_line:
                break
            status = int(status_line.split(b" ", 2)[1])
            headers: dict[str, str] = {}
            while (line := reader.readline(65_536)) not in (b"\r\n", b"\n", b""):
                name, _, value = line.decode("latin-1").partition(":")
                headers[name.strip().lower()] = value.strip()
            length = 0 if head or status < 200 else int(headers.get("content-length", "0"))
            answers.append(Answer(status, headers, reader.read(length)))
    finally:
        reader.close()
    return answers


def exchange(
    address: tuple[str, int],
    raw: bytes,
    *,
    answers: int = 1,
    half_close: bool = False,
    timeout: float = 5.0,
    wait_for_close: bool = True,
) -> tuple[list[Answer], bool]:
    """Send ``raw`` on a new connection; the answers read, and whether the server then closed it
    (not waited for, and False, without ``wait_for_close``: a kept-alive connection stays open)."""
    with connect(address, timeout) as connection:
        connection.sendall(raw)
        if half_close:
            with contextlib.suppress(OSError):  # the server may have refused and closed already
                connection.shutdown(socket.SHUT_WR)
        got = read_answers(connection, answers)
        return got, wait_for_close and closed_by_server(connection, timeout)


def closed_by_server(connection: socket.socket, timeout: float = 5.0) -> bool:
    """True when the server closes the connection within ``timeout`` (what it still sends is dropped)."""
    connection.settimeout(timeout)
    try:
        while connection.recv(65_536):
            pass
    except TimeoutError:
        return False
    except OSError:  # reset: closed too
        return True
    return True


def assert_refused(answer: Answer, status: int, code: str) -> None:
    """A clean refusal: the status, the API's JSON with the stable code, no Python in ``Server``."""
    assert answer.status == status, answer
    assert answer.headers.get("content-type") == "application/json", answer
    assert answer.headers.get("server") == SERVER_NAME, answer
    body = answer.json()
    assert body["code"] == code, body
    assert body["message"], body


def request(method: str, path: str, *headers: str, body: bytes = b"") -> bytes:
    """One well-formed request; ``headers`` as ``"Name: value"`` lines."""
    lines = [f"{method} {path} HTTP/1.1", "Host: ipmeta.test", *headers]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def peak_rss_bytes(pid: int | None = None) -> int:
    """The process's peak resident memory (VmHWM)."""
    status = Path(f"/proc/{pid or os.getpid()}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024


def rss_bytes(pid: int | None = None) -> int:
    status = Path(f"/proc/{pid or os.getpid()}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmRSS:"))
    return int(line.split()[1]) * 1024


def wait_for(condition: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return bool(condition())
