"""The lookup page at ``/``, as a person sees it: headless Chromium loads it from the real server.

Demo-like data, small: an ASN dataset and a cloud dataset (as ``make run`` loads), and a
city-shaped one with coordinates. The map's tiles come from OpenStreetMap in a person's
browser; here they are blocked, as offline, and the page must work all the same. Every
page must load with no console error, no uncaught exception and no Content-Security-Policy
violation. The map test's screenshot goes to ``test-artifacts/lookup-page.png``, and to
``docs/lookup-page.png`` (the README's) when that is missing or ``IPMETA_UPDATE_SCREENSHOTS``
is set.
"""

from __future__ import annotations

import os
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from ipmeta.api.handler import handler
from ipmeta.api.routes.page_routes import CONTENT_SECURITY_POLICY
from ipmeta.schema.settings import Settings
from ipmeta.store.dynamodb import make_client
from ipmeta_cli.server import LocalApiServer
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from tests.integration.browser import Browser, browser, find_chromium
from tests.integration.conftest import get_json, running_api_server

pytestmark = pytest.mark.browser

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "page"
ARTIFACTS = ROOT / "test-artifacts"
SCREENSHOT = ROOT / "docs" / "lookup-page.png"
#: Blocked in every test, as offline: the page must not need them.
TILES = "tile.openstreetmap.org"
KEY = "page-test-key"
#: As `make run` loads them (ipmeta_cli.demo), and a city-shaped dataset beside them.
DATASETS = {
    "asn": LoadOptions(dataset="asn", index_field="asn"),
    "cloud": LoadOptions(dataset="cloud", flag_column="cloud_provider"),
    "city": LoadOptions(dataset="city"),
}
ANSWER_SHOWN = "!document.getElementById('answer').hidden"
ERROR_SHOWN = "!document.getElementById('error').hidden"


@pytest.fixture(scope="module")
def chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("no headless Chromium on this machine (Debian: apt-get install -y chromium)")
    return path


@pytest.fixture(scope="module")
def page_server(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiServer]:
    settings = Settings(
        table_name="ipmeta-page-test", dynamodb_endpoint=dynalite_endpoint, pointer_cache_seconds=0
    )
    create_table_if_missing(make_client(settings), settings.table_name)
    table = LoaderTable.from_settings(settings)
    staging = tmp_path_factory.mktemp("page-staging")
    for name, options in DATASETS.items():
        driver.run_load([FIXTURES / f"{name}.csv"], options, table, LocalStaging(staging / name))
    with running_api_server(table) as server:
        yield server


@pytest.fixture
def page(chromium: str, tmp_path: Path) -> Iterator[Browser]:
    with browser(chromium, tmp_path / "profile", blocked=(f"*{TILES}*",)) as opened:
        yield opened


def rows(page: Browser, table: str) -> dict[str, str]:
    return dict(
        page.evaluate(
            f"[...document.querySelectorAll('{table} tr')].map(row => [row.cells[0].textContent, "
            "row.cells[1].textContent])"
        )
    )


def test_the_page_answers_1_1_1_1_from_both_datasets_with_as13335(
    page_server: LocalApiServer, page: Browser
) -> None:
    # When a person opens the page with ?ip=1.1.1.1
    page.open(f"{page_server.url}/?ip=1.1.1.1")
    page.wait_for(ANSWER_SHOWN)
    # Then it shows the address, the merged answer (AS13335) and each dataset's section
    assert page.evaluate("document.getElementById('answer-ip').textContent") == "1.1.1.1"
    assert page.evaluate("document.getElementById('ip').value") == "1.1.1.1"
    merged = rows(page, "#merged")
    assert (merged["asn"], merged["organization"]) == ("13335", "Cloudflare, Inc.")
    sections = page.evaluate("[...document.querySelectorAll('.dataset')].map(s => s.dataset.dataset)")
    assert sorted(sections) == ["asn", "city", "cloud"]
    asn = page.evaluate("document.querySelector('[data-dataset=asn]').textContent")
    assert "1.1.1.0 – 1.1.1.255 (1.1.1.0/24)" in asn
    assert "13335" in asn
    assert "v1" in asn
    cloud = page.evaluate("document.querySelector('[data-dataset=cloud]').textContent")
    assert "No range of this dataset holds the address" in cloud
    # And no map: no dataset has a location for it
    assert page.evaluate("document.getElementById('map').hidden") is True
    assert page.problems() == []


def test_a_city_answer_shows_the_map_with_a_marker_without_the_tiles(
    page_server: LocalApiServer, page: Browser
) -> None:
    page.open(f"{page_server.url}/?ip=81.2.69.160")
    # The marker's image is the page's own (Leaflet's, shipped with the function), loaded
    marker = "document.querySelector('#map .leaflet-marker-icon')"
    page.wait_for(f"{marker} && {marker}.complete && {marker}.naturalWidth > 0")
    assert page.evaluate("document.getElementById('map').hidden") is False
    assert page.evaluate(f"{marker}.getAttribute('src')").endswith("static/leaflet/images/marker-icon.png")
    merged = rows(page, "#merged")
    assert (merged["city"], merged["latitude"], merged["longitude"]) == ("London", "51.5142", "-0.0931")
    assert merged["asn"] == "20712"
    # No tile arrived (they are blocked); nothing else failed
    assert page.evaluate("document.querySelectorAll('#map img.leaflet-tile-loaded').length") == 0
    assert page.problems(allowed_hosts=(TILES,)) == []
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(ARTIFACTS / "lookup-page.png")
    if os.environ.get("IPMETA_UPDATE_SCREENSHOTS") or not SCREENSHOT.exists():
        page.screenshot(SCREENSHOT)
    assert (ARTIFACTS / "lookup-page.png").stat().st_size > 20_000


def test_an_invalid_address_shows_the_apis_own_message(page_server: LocalApiServer, page: Browser) -> None:
    status, body = get_json(page_server, "/v1/ip/999.1.1.1")
    assert status == 400
    page.open(f"{page_server.url}/?ip=999.1.1.1")
    assert page.wait_for(f"{ERROR_SHOWN} && document.getElementById('error').textContent") == body["message"]
    assert page.evaluate("document.getElementById('answer').hidden") is True
    # The browser notes the API's 400 itself; the page logs nothing
    assert page.problems(allowed_hosts=("/v1/ip/999.1.1.1",)) == []


def test_without_an_address_the_page_answers_the_callers_own(
    page_server: LocalApiServer, page: Browser
) -> None:
    # The caller here is 127.0.0.1: a reserved address no dataset holds, and the API says so
    status, body = get_json(page_server, "/v1/ip")
    assert (status, body["code"]) == (404, "IP_ADDRESS_RESERVED")
    page.open(f"{page_server.url}/")
    assert page.wait_for(f"{ERROR_SHOWN} && document.getElementById('error').textContent") == body["message"]
    assert page.problems(allowed_hosts=("/v1/ip",)) == []


def test_behind_a_key_the_page_asks_once_and_keeps_it_in_the_browser(
    page_server: LocalApiServer, page: Browser
) -> None:
    keyed = LocalApiServer("127.0.0.1", 0, handler, api_keys=[KEY])
    threading.Thread(target=keyed.serve_forever, daemon=True).start()
    try:
        # Given a front that needs a key: the page and its files still load without one
        page.open(f"{keyed.url}/?ip=8.8.8.8")
        page.wait_for("!document.getElementById('key').hidden")
        assert page.evaluate("document.getElementById('error').textContent") == "The API needs a key."
        # When the person enters the key once
        page.evaluate(
            f"document.getElementById('key-value').value = '{KEY}';"
            "document.getElementById('key').requestSubmit(); true"
        )
        page.wait_for(ANSWER_SHOWN)
        assert rows(page, "#merged")["organization"] == "Google LLC"
        # Then the browser keeps it, and the next visit asks for nothing
        assert page.evaluate("localStorage.getItem('ipmeta-api-key')") == KEY
        page.open(f"{keyed.url}/?ip=1.1.1.1")
        page.wait_for(f"{ANSWER_SHOWN} && document.getElementById('answer-ip').textContent === '1.1.1.1'")
        assert page.evaluate("document.getElementById('key').hidden") is True
        # The only failure is the first lookup's 401, before the key
        assert page.problems(allowed_hosts=("/v1/ip/8.8.8.8",)) == []
    finally:
        keyed.shutdown()
        keyed.server_close()


def test_the_page_and_its_files_carry_the_policy(page_server: LocalApiServer) -> None:
    for path in (
        "/",
        "/static/page.js",
        "/static/leaflet/leaflet.css",
        "/static/leaflet/images/marker-icon.png",
    ):
        with urllib.request.urlopen(page_server.url + path, timeout=10) as response:
            assert response.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY, path
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            body = response.read()
        if path.endswith(".png"):
            assert body.startswith(b"\x89PNG\r\n\x1a\n")  # bytes, not base64
    # HEAD as GET, without the body, and no key either
    head = urllib.request.Request(page_server.url + "/", method="HEAD")
    with urllib.request.urlopen(head, timeout=10) as response:
        assert (response.status, response.read()) == (200, b"")
        assert response.headers["Content-Type"] == "text/html; charset=utf-8"
    # No inline script or style in the page: its policy would refuse them
    with urllib.request.urlopen(page_server.url + "/", timeout=10) as response:
        text = response.read().decode()
    assert "<script>" not in text
    assert "<style" not in text
    assert " style=" not in text
    assert "'unsafe-inline'" not in CONTENT_SECURITY_POLICY
    assert "img-src 'self' https://tile.openstreetmap.org" in CONTENT_SECURITY_POLICY


def test_the_checks_see_a_console_error_and_a_policy_violation(
    page_server: LocalApiServer, page: Browser
) -> None:
    # Given the page loaded clean
    page.open(f"{page_server.url}/?ip=1.1.1.1")
    page.wait_for(ANSWER_SHOWN)
    assert page.problems() == []
    # When something logs an error and an image from elsewhere is added, Then both are reported
    page.evaluate(
        "console.error('broken');"
        "document.body.insertAdjacentHTML('beforeend', '<img src=\"https://example.com/x.png\">'); true"
    )
    page.wait_for("window.__cspViolations.length > 0")
    found = page.problems()
    assert "console: broken" in found
    assert "csp: img-src https://example.com/x.png" in found
