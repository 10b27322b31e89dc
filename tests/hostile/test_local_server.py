"""`ipmeta serve`'s framing, sizes and time, attacked over raw sockets.

Every case is a named pytest id saying what it sends. Each must be refused with the
API's JSON and its stable code (never http.server's HTML, never ``Python/3.x`` in
``Server``), within the server's time bounds, and the server must answer a good
request afterwards. The server here runs in the test's process with short limits
(``LIMITS``); the big-body cases run ``ipmeta serve`` in its own process, whose
peak memory they read.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipmeta.schema.settings import ENV_DYNAMODB_ENDPOINT, ENV_TABLE_NAME, Front, Settings
from ipmeta_cli.dynalite import free_port, port_open
from ipmeta_cli.server import ConnectionLimits, LocalApiServer
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from tests.hostile.raw_http import (
    SERVER_NAME,
    Answer,
    assert_refused,
    closed_by_server,
    connect,
    exchange,
    peak_rss_bytes,
    read_answers,
    request,
    wait_for,
)
from tests.integration.conftest import load_csv, running_api_server

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"
LIMITS = ConnectionLimits(idle_timeout=1.0, request_timeout=1.0, write_timeout=1.0, max_connections=16)
KEY = "hostile-server-k3y"
GOOD = request("GET", "/v1/ip/1.0.0.1")
#: A good request that does not keep its connection open after its answer.
GOOD_ONCE = request("GET", "/v1/ip/1.0.0.1", "Connection: close")
MB = 1024 * 1024


@pytest.fixture(scope="module")
def table(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> LoaderTable:
    settings = Settings("ipmeta-hostile-local-server", dynalite_endpoint, 0.0)
    store = LoaderTable.from_settings(settings)
    create_table_if_missing(store.client, store.table_name)
    load_csv(store, [FIXTURE], tmp_path_factory.mktemp("load"))
    return store


@pytest.fixture(scope="module")
def server(table: LoaderTable) -> Iterator[LocalApiServer]:
    with running_api_server(table, limits=LIMITS) as running:
        yield running


@pytest.fixture(scope="module")
def address(server: LocalApiServer) -> tuple[str, int]:
    host, port = server.server_address[:2]
    return str(host), port


def assert_serving(address: tuple[str, int]) -> None:
    """A good request, on a new connection, answers 200 from the loaded data."""
    [answer], _ = exchange(address, GOOD_ONCE, wait_for_close=False)
    assert answer.status == 200, answer
    assert answer.headers["server"] == SERVER_NAME
    assert answer.json()["data"]["asn"] == 13335


def chunked(*chunks: bytes, trailer: bytes = b"") -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks) + b"0\r\n" + trailer + b"\r\n"


POST = "POST /v1/batch HTTP/1.1\r\nHost: t\r\n"
FRAMING_CASES = [
    pytest.param(POST + "Content-Length: abc\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="content-length-abc"),
    pytest.param(
        POST + "Content-Length: -1\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="content-length-minus-1"
    ),
    pytest.param(POST + "Content-Length: +2\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="content-length-plus-2"),
    pytest.param(POST + "Content-Length: 0x2\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="content-length-hex"),
    pytest.param(
        POST + "Content-Length: \u00b2\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="content-length-superscript-2"
    ),
    pytest.param(
        POST + "Content-Length: 99999999999\r\n\r\n[]",
        413,
        "REQUEST_TOO_LARGE",
        id="content-length-99999999999",
    ),
    pytest.param(
        POST + "Content-Length: " + "9" * 5000 + "\r\n\r\n",
        413,
        "REQUEST_TOO_LARGE",
        id="content-length-5000-digits",
    ),
    pytest.param(
        POST + f"Content-Length: {10 * MB + 1}\r\n\r\n[]",
        413,
        "REQUEST_TOO_LARGE",
        id="content-length-10mb-plus-1",
    ),
    pytest.param(
        POST + "Content-Length: 2\r\nContent-Length: 40\r\n\r\n[]",
        400,
        "REQUEST_MALFORMED",
        id="two-content-lengths-differing",
    ),
    pytest.param(
        POST + "Content-Length: 2\r\nContent-Length: 2\r\n\r\n[]",
        400,
        "REQUEST_MALFORMED",
        id="two-content-lengths-equal",
    ),
    pytest.param(POST + "Content-Length: 2, 2\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="content-length-list"),
    pytest.param(
        POST + "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n",
        400,
        "REQUEST_MALFORMED",
        id="content-length-beside-chunked",
    ),
    pytest.param(
        POST + "Transfer-Encoding: gzip\r\n\r\n", 501, "NOT_IMPLEMENTED", id="transfer-encoding-gzip"
    ),
    pytest.param(
        POST + "Transfer-Encoding: gzip, chunked\r\n\r\n",
        501,
        "NOT_IMPLEMENTED",
        id="transfer-encoding-gzip-chunked",
    ),
    pytest.param(
        POST + "Transfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "REQUEST_MALFORMED", id="chunk-size-not-hex"
    ),
    pytest.param(
        POST + "Transfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFF\r\n",
        413,
        "REQUEST_TOO_LARGE",
        id="chunk-size-huge",
    ),
    pytest.param(
        POST + "Transfer-Encoding: chunked\r\n\r\n" + "1" * 2000 + "\r\n",
        400,
        "REQUEST_MALFORMED",
        id="chunk-size-line-2000-bytes",
    ),
    pytest.param(
        POST + "Transfer-Encoding: chunked\r\n\r\n5\r\n[]\r\n",
        400,
        "REQUEST_MALFORMED",
        id="chunked-body-cut-short",
    ),
    pytest.param(
        "POST /v1/batch HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n",
        400,
        "REQUEST_MALFORMED",
        id="chunked-on-http-1.0",
    ),
    pytest.param(
        POST + "Content-Length: 10\r\n\r\n[]", 400, "REQUEST_MALFORMED", id="body-shorter-than-length"
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\nContent-Length : 5\r\n\r\n",
        400,
        "REQUEST_MALFORMED",
        id="space-before-colon",
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\nX-A: a\rX-B: b\r\n\r\n",
        400,
        "REQUEST_MALFORMED",
        id="header-with-bare-cr",
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\nX-A: a\0b\r\n\r\n", 400, "REQUEST_MALFORMED", id="header-with-nul"
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\nno colon here\r\n\r\n", 400, "REQUEST_MALFORMED", id="header-no-colon"
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\nX-A: " + "a" * 70_000 + "\r\n\r\n",
        431,
        "HEADERS_TOO_LARGE",
        id="header-line-70kb",
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\n" + "X-A: a\r\n" * 101 + "\r\n",
        431,
        "HEADERS_TOO_LARGE",
        id="101-headers",
    ),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1\r\n" + ("X-A: " + "a" * 2000 + "\r\n") * 40 + "\r\n",
        431,
        "HEADERS_TOO_LARGE",
        id="header-block-80kb",
    ),
    pytest.param("GET /" + "a" * 70_000 + " HTTP/1.1\r\n\r\n", 414, "URI_TOO_LONG", id="request-line-70kb"),
    pytest.param("GET /v1/ip/1.0.0.1\r\n", 505, "HTTP_VERSION_NOT_SUPPORTED", id="http-0.9-request-line"),
    pytest.param(
        "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04\x00\x00\x00\x00\x00",
        505,
        "HTTP_VERSION_NOT_SUPPORTED",
        id="http-2.0-preface",
    ),
    pytest.param("GET /v1/ip/1.0.0.1 HTTP/3.0\r\n\r\n", 505, "HTTP_VERSION_NOT_SUPPORTED", id="http-3.0"),
    pytest.param("GET /v1/ip/1.0.0.1 HTTQ/1.1\r\n\r\n", 400, "REQUEST_MALFORMED", id="not-http"),
    pytest.param(
        "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n",
        400,
        "REQUEST_MALFORMED",
        id="tls-hello-in-clear",
    ),
    pytest.param("FOO /v1/ip/1.0.0.1 HTTP/1.1\r\n\r\n", 501, "NOT_IMPLEMENTED", id="method-foo"),
    pytest.param("TRACE /v1/ip/1.0.0.1 HTTP/1.1\r\n\r\n", 501, "NOT_IMPLEMENTED", id="method-trace"),
    pytest.param("get /v1/ip/1.0.0.1 HTTP/1.1\r\n\r\n", 501, "NOT_IMPLEMENTED", id="method-lower-case"),
    pytest.param("G(T /v1/ip/1.0.0.1 HTTP/1.1\r\n\r\n", 400, "REQUEST_MALFORMED", id="method-not-a-token"),
    pytest.param("GET v1/ip/1.0.0.1 HTTP/1.1\r\n\r\n", 400, "REQUEST_MALFORMED", id="target-not-a-path"),
    pytest.param(
        "GET /v1/ip/1.0.0.1 HTTP/1.1 extra\r\n\r\n", 400, "REQUEST_MALFORMED", id="request-line-four-words"
    ),
]


@pytest.mark.parametrize(("raw", "status", "code"), FRAMING_CASES)
def test_framing_is_refused_in_json_and_the_server_keeps_serving(
    address: tuple[str, int], raw: str, status: int, code: str
) -> None:
    # Given a request whose framing cannot be trusted (sent whole, then half-closed: no more comes)
    started = time.monotonic()
    answers, closed = exchange(address, raw.encode("latin-1"), half_close=True)
    # Then it is refused with the API's JSON, at once, and the connection is not reused
    assert len(answers) == 1, answers
    assert_refused(answers[0], status, code)
    assert answers[0].headers.get("connection") == "close"
    assert closed
    assert time.monotonic() - started < 3
    assert_serving(address)


def slow_send(connection: socket.socket, head: bytes, drip: bytes, every: float, seconds: float) -> float:
    """Send ``head``, then ``drip`` a byte at a time until the server answers; when it did."""
    started = time.monotonic()
    connection.sendall(head)
    for byte in drip * 100:
        readable, _, _ = select.select([connection], [], [], every)
        if readable or time.monotonic() - started > seconds:
            break
        try:
            connection.send(bytes([byte]))
        except OSError:
            break
    return time.monotonic() - started


@pytest.mark.parametrize(
    ("head", "drip"),
    [
        pytest.param(b"GET /v1/ip/1.", b"0", id="slowloris-request-line"),
        pytest.param(b"GET /v1/ip/1.0.0.1 HTTP/1.1\r\nX-Slow: ", b"a", id="slowloris-headers"),
        pytest.param(POST.encode() + b"Content-Length: 10000\r\n\r\n[", b" ", id="slowloris-body"),
    ],
)
def test_a_request_sent_a_byte_at_a_time_is_cut_at_its_deadline(
    address: tuple[str, int], head: bytes, drip: bytes
) -> None:
    # Given a client that sends a byte every 0.2 s, each well within any per-read timeout
    with connect(address) as connection:
        took = slow_send(connection, head, drip, every=0.2, seconds=6)
        # Then the whole request's deadline cuts it: 408 in JSON, and the connection closes
        [answer] = read_answers(connection, 1)
        assert_refused(answer, 408, "REQUEST_TIMEOUT")
        assert closed_by_server(connection)
    assert took < LIMITS.idle_timeout + LIMITS.request_timeout + 1.5
    assert_serving(address)


@pytest.mark.parametrize(
    "first", [pytest.param(b"", id="half-open-sends-nothing"), pytest.param(GOOD, id="keep-alive")]
)
def test_an_idle_connection_is_closed_after_the_idle_timeout(address: tuple[str, int], first: bytes) -> None:
    with connect(address) as connection:
        connection.sendall(first)
        if first:
            [answer] = read_answers(connection, 1)
            assert answer.status == 200
        started = time.monotonic()
        # Nothing to refuse: an idle connection is closed silently, as keep-alive ends
        assert closed_by_server(connection, timeout=LIMITS.idle_timeout + 2)
        assert time.monotonic() - started < LIMITS.idle_timeout + 1.5


def test_500_half_open_connections_leave_room_for_a_good_request(address: tuple[str, int]) -> None:
    # Given 500 connections that never send a byte (the server keeps at most 16)
    threads_before = threading.active_count()
    rss_before = peak_rss_bytes()
    idle = [connect(address) for _ in range(500)]
    try:
        # Then a good request is still answered at once: an idle connection made room for it
        started = time.monotonic()
        assert_serving(address)
        assert time.monotonic() - started < 2
        assert threading.active_count() <= threads_before + LIMITS.max_connections + 2
        assert peak_rss_bytes() - rss_before < 50 * MB
    finally:
        for connection in idle:
            connection.close()


def test_when_every_connection_is_busy_a_newcomer_gets_503_until_they_time_out(
    address: tuple[str, int],
) -> None:
    # Given as many connections as the server holds, each inside a request that never ends
    busy = [connect(address) for _ in range(LIMITS.max_connections)]
    try:
        for connection in busy:
            connection.sendall(b"GET /v1/ip/1.0.0.1 HTTP/1.1\r\nX-Slow: ")
        time.sleep(0.3)
        # Then a newcomer is refused in JSON rather than queued behind them
        [answer], closed = exchange(address, GOOD)
        assert_refused(answer, 503, "SERVER_BUSY")
        assert closed
        # And once their deadline passes (408 each), the server serves again
        assert wait_for(lambda: exchange(address, GOOD_ONCE)[0][0].status == 200, LIMITS.request_timeout + 3)
    finally:
        for connection in busy:
            connection.close()


def test_pipelined_requests_are_answered_in_order(address: tuple[str, int]) -> None:
    ips = ["1.0.0.1", "1.0.5.9", "2001:200::1"]
    raw = b"".join(request("GET", f"/v1/ip/{ip}") for ip in ips)
    answers, _ = exchange(address, raw, answers=3, wait_for_close=False)
    assert [answer.json()["ip"] for answer in answers] == ips


def test_a_refused_body_that_was_read_keeps_the_connection_in_step(address: tuple[str, int]) -> None:
    # Given a batch whose body is read whole and refused, then a good request on the same connection
    raw = request("POST", "/v1/batch", body=b"{not json") + GOOD
    answers, _ = exchange(address, raw, answers=2, wait_for_close=False)
    assert [answer.status for answer in answers] == [400, 200]
    assert answers[0].json()["code"] == "BATCH_BODY_NOT_JSON"


def test_a_request_smuggled_behind_two_content_lengths_is_never_answered(address: tuple[str, int]) -> None:
    smuggled = b"GET /v1/ip/1.0.5.9 HTTP/1.1\r\nHost: t\r\n\r\n"
    raw = (POST + f"Content-Length: 2\r\nContent-Length: {2 + len(smuggled)}\r\n\r\n[]").encode() + smuggled
    answers, closed = exchange(address, raw, answers=2)
    assert len(answers) == 1
    assert_refused(answers[0], 400, "REQUEST_MALFORMED")
    assert closed


@pytest.mark.parametrize(
    "body",
    [
        pytest.param(chunked(b'["1.0.0.1",', b' "2001:200::1"]'), id="chunked-body"),
        pytest.param(
            b'5;name="x"\r\n["1.0\r\n' + chunked(b'.0.1"]', trailer=b"X-Trailer: t\r\n"),
            id="chunk-extension-and-trailer",
        ),
    ],
)
def test_a_chunked_body_is_read_and_the_connection_stays_in_step(
    address: tuple[str, int], body: bytes
) -> None:
    raw = (POST + "Transfer-Encoding: chunked\r\n\r\n").encode() + body + GOOD
    answers, _ = exchange(address, raw, answers=2, wait_for_close=False)
    assert [answer.status for answer in answers] == [200, 200]
    assert "1.0.0.1" in answers[0].json()


def test_a_body_of_exactly_10_mb_is_read(address: tuple[str, int]) -> None:
    body = b"[" + b" " * (10 * MB - 2) + b"]"
    [answer], _ = exchange(address, request("POST", "/v1/batch", body=body), wait_for_close=False)
    assert (answer.status, answer.json()) == (200, {})


def test_a_body_over_10_mb_is_refused_before_it_is_read(address: tuple[str, int]) -> None:
    # Given a body declared at 10 MB + 1 whose first megabyte is sent
    rss_before = peak_rss_bytes()
    with connect(address) as connection:
        connection.sendall((POST + f"Content-Length: {10 * MB + 1}\r\n\r\n").encode() + b" " * MB)
        [answer] = read_answers(connection, 1)
    assert_refused(answer, 413, "REQUEST_TOO_LARGE")
    assert peak_rss_bytes() - rss_before < 20 * MB
    assert_serving(address)


def test_a_client_that_never_reads_its_answers_is_dropped(address: tuple[str, int]) -> None:
    # Given 300 pipelined requests for the OpenAPI document whose answers are never read
    connection = connect(address)
    try:
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        connection.sendall(request("GET", "/v1/openapi.json") * 300)
        # Then other clients are served meanwhile, and the writer gives up after its timeout
        assert_serving(address)
        time.sleep(LIMITS.write_timeout + 0.5)
        assert closed_by_server(connection, timeout=10)
    finally:
        connection.close()


# -- keys and bodies: the key is checked from the headers before any body is read ----------------


@pytest.fixture(scope="module")
def keyed_address(server: LocalApiServer) -> Iterator[tuple[str, int]]:
    """A second server on the same store (installed by ``server``), requiring ``KEY``."""
    from ipmeta.api.handler import handler

    keyed = LocalApiServer("127.0.0.1", 0, handler, api_keys=[KEY], limits=LIMITS, front=Front.REST)
    threading.Thread(target=keyed.serve_forever, daemon=True).start()
    try:
        yield "127.0.0.1", keyed.server_address[1]
    finally:
        keyed.shutdown()
        keyed.server_close()


def test_expect_100_continue_without_a_key_is_refused_before_the_body(keyed_address: tuple[str, int]) -> None:
    raw = (POST + "Expect: 100-continue\r\nContent-Length: 11\r\n\r\n").encode()
    with connect(keyed_address) as connection:
        connection.sendall(raw)
        [answer] = read_answers(connection, 1)
    assert_refused(answer, 401, "AUTHORIZATION_INVALID")


def test_expect_100_continue_with_a_key_continues(keyed_address: tuple[str, int]) -> None:
    raw = (POST + f"x-api-key: {KEY}\r\nExpect: 100-continue\r\nContent-Length: 11\r\n\r\n").encode()
    with connect(keyed_address) as connection:
        connection.sendall(raw)
        [interim] = read_answers(connection, 1)
        assert interim.status == 100
        connection.sendall(b'["1.0.0.1"]')
        [answer] = read_answers(connection, 1)
    assert answer.status == 200
    assert answer.json()["1.0.0.1"]["data"]["asn"] == 13335


# -- `ipmeta serve` in its own process: its memory under a big body, its key never in `ps` -----------


@pytest.fixture(scope="module")
def serve_process(
    table: LoaderTable, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[subprocess.Popen[bytes]]:
    """`ipmeta serve` with one key in a file and another in the environment, none on its command line,
    as the REST front: the server checks the key before the function, from the headers alone."""
    key_file = tmp_path_factory.mktemp("keys") / "keys.txt"
    key_file.write_text(f"# the team's key\n{KEY}-file\n")
    port = free_port()
    env = {
        **os.environ,
        ENV_DYNAMODB_ENDPOINT: str(table.client.meta.endpoint_url),
        ENV_TABLE_NAME: table.table_name,
        "IPMETA_API_KEY": f"{KEY}-env",
        "PYTHONPATH": os.pathsep.join(
            [str(Path(__file__).parents[2] / "lambdas"), str(Path(__file__).parents[2])]
        ),
    }
    command = [sys.executable, "-m", "ipmeta_cli.main", "serve", "--port", str(port), "--workers", "1"]
    process = subprocess.Popen(
        [*command, "--front", "rest", "--api-key-file", str(key_file)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert wait_for(lambda: port_open(port) or process.poll() is not None, 30)
        assert process.poll() is None, "ipmeta serve exited"
        process.port = port  # type: ignore[attr-defined]
        yield process
    finally:
        process.terminate()
        process.wait(10)


def serve_address(process: subprocess.Popen[bytes]) -> tuple[str, int]:
    return "127.0.0.1", process.port  # type: ignore[attr-defined]


def stream_body(address: tuple[str, int], head: bytes, size: int) -> tuple[Answer | None, float]:
    """Send ``head`` and then ``size`` bytes of body, reading the answer as soon as it comes."""
    with connect(address, timeout=20) as connection:
        connection.sendall(head)
        sender = threading.Thread(target=_send_zeros, args=(connection, size), daemon=True)
        started = time.monotonic()
        sender.start()
        answers = read_answers(connection, 1)
        took = time.monotonic() - started
        sender.join(20)
    return (answers[0] if answers else None), took


def _send_zeros(connection: socket.socket, size: int) -> None:
    chunk = b"0" * MB
    try:
        for _ in range(size // MB):
            connection.sendall(chunk)
    except OSError:
        pass  # the server refused and closed: the rest is never sent


def test_a_300_mb_post_without_a_key_is_refused_before_it_is_read(
    serve_process: subprocess.Popen[bytes],
) -> None:
    # Given `ipmeta serve` at rest, and a 300 MB POST with no key
    address = serve_address(serve_process)
    [warm], _ = exchange(
        address, request("GET", "/v1/ip/1.0.0.1", f"x-api-key: {KEY}-env"), wait_for_close=False
    )
    assert warm.status == 200
    peak_before = peak_rss_bytes(serve_process.pid)
    head = (POST + f"Content-Length: {300 * MB}\r\n\r\n").encode()
    answer, took = stream_body(address, head, 300 * MB)
    # Then the answer is 401 at once, and the server's peak memory hardly moved
    assert answer is not None
    assert_refused(answer, 401, "AUTHORIZATION_INVALID")
    assert took < 2
    growth = peak_rss_bytes(serve_process.pid) - peak_before
    print(f"server peak RSS {peak_before / MB:.0f} MB before, +{growth / MB:.1f} MB under a 300 MB POST")
    assert growth < 30 * MB
    [after], _ = exchange(
        address, request("GET", "/v1/ip/1.0.0.1", f"x-api-key: {KEY}-file"), wait_for_close=False
    )
    assert after.status == 200


def test_a_300_mb_post_with_a_key_is_refused_at_10_mb(serve_process: subprocess.Popen[bytes]) -> None:
    address = serve_address(serve_process)
    peak_before = peak_rss_bytes(serve_process.pid)
    head = (POST + f"x-api-key: {KEY}-env\r\nContent-Length: {300 * MB}\r\n\r\n").encode()
    answer, took = stream_body(address, head, 300 * MB)
    assert answer is not None
    assert_refused(answer, 413, "REQUEST_TOO_LARGE")
    assert took < 2
    assert peak_rss_bytes(serve_process.pid) - peak_before < 30 * MB


def test_the_served_keys_come_from_a_file_and_the_environment_never_the_command_line(
    serve_process: subprocess.Popen[bytes],
) -> None:
    address = serve_address(serve_process)
    command_line = Path(f"/proc/{serve_process.pid}/cmdline").read_bytes()
    assert KEY.encode() not in command_line
    for key, status in ((f"{KEY}-file", 200), (f"{KEY}-env", 200), ("wrong", 401), (KEY, 401)):
        [answer], _ = exchange(
            address, request("GET", "/v1/ip/1.0.0.1", f"x-api-key: {key}"), wait_for_close=False
        )
        assert answer.status == status, key
    body = json.loads(exchange(address, request("GET", "/v1/ip/1.0.0.1"), wait_for_close=False)[0][0].body)
    assert body["code"] == "AUTHORIZATION_INVALID"
