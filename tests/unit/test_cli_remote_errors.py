"""`ipmeta ranges|flagged|lookup --endpoint`: a non-JSON error page still ends as a clean failure."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ipmeta_cli.main import main
from ipmeta_cli.reverse import REQUEST_FAILED


class GatewayErrorPage(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"<html><body>502 Bad Gateway</body></html>"
        self.send_response(502)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET  # noqa: N815 - the name http.server calls for POST

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def gateway() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), GatewayErrorPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    "argv", [["ranges", "--field", "asn", "--value", "13335"], ["flagged"], ["lookup", "1.1.1.1"]]
)
def test_a_non_json_error_page_is_reported_not_raised(
    gateway: str, argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code = main([*argv, "--endpoint", gateway])
    assert code == REQUEST_FAILED
    assert "502 Bad Gateway" in capsys.readouterr().err
