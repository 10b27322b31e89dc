"""Every route through every front's event shape, with and without a key, in each of the clients' forms.

Given small.csv loaded (indexed by ``asn``, flagged by ``country``) with ipinfo's routes at the root
too, each route is asked through the event its front sends (``ipmeta_cli.events``: REST's proxy
event, an HTTP API's payload 2.0, a function URL's payload 2.0) and the real handler answers:

- the answers are the REST front's, byte for byte, on every front;
- a key is admitted, on every front, exactly in its route family's forms: by the REST front's
  request authorizer (then the usage plan), by the HTTP front's authorizer against its secret, and
  by the function itself behind the url front (``ipmeta.api.fronts.key_check``), which refuses everything
  else with 401 ``AUTHORIZATION_INVALID`` before any read.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ipmeta.api import dependencies
from ipmeta.api.fronts import authorizer, key_check
from ipmeta.api.fronts.credentials import KeyForm, family_of_route, is_page_path, route_of_path
from ipmeta.schema.settings import Front, Settings
from ipmeta_cli.events import EVENT_BUILDERS
from loader.options import LoadOptions
from loader.pipeline import driver
from loader.store.staging import LocalStaging
from loader.store.table import LoaderTable
from loader.store.table_creation import create_table_if_missing
from testing.in_process_api import handle, invoke
from tests.authorizer_events import FAMILY_FORMS, HTTP_KEYS, admitted_key, carrying, named_forms
from tests.integration.conftest import get_json, running_api_server

FIXTURE = Path(__file__).parents[1] / "fixtures" / "small.csv"
CALLER = "198.51.100.23"
#: The HTTP front's secret's "default" client; the usage plan and the url front's keys hold it too.
KEY = str(HTTP_KEYS["default"])
#: One request for each route of the route table (``ipmeta.api.app``), its method and its body.
ROUTES: tuple[tuple[str, str, bytes], ...] = (
    ("GET", "/v1/ip/1.0.0.1?fields=asn", b""),
    ("GET", "/v1/ip/1.0.0.1/organization", b""),
    ("GET", "/v1/ip", b""),
    ("POST", "/v1/batch", b'["1.0.0.1", "10.0.1.7", "nope"]'),
    ("GET", "/v1/datasets", b""),
    ("GET", "/v1/datasets/default", b""),
    ("GET", "/v1/datasets/current", b""),
    ("GET", "/v1/health", b""),
    ("GET", "/v1/ranges?field=asn&value=13335", b""),
    ("GET", "/v1/flagged?limit=2", b""),
    ("GET", "/v1/openapi.json", b""),
    ("GET", "/v1/docs?format=json", b""),
    ("GET", "/geoip/v2.1/country/1.0.0.1", b""),
    ("GET", "/geoip/v2.1/city/1.0.0.1", b""),
    ("GET", "/geoip/v2.1/insights/1.0.0.1", b""),
    ("GET", "/ipinfo/1.0.0.1", b""),
    ("GET", "/ipinfo/1.0.0.1/org", b""),
    ("GET", "/ipinfo", b""),
    ("GET", "/ipinfo/json", b""),
    ("POST", "/ipinfo/batch", b'["1.0.0.1/country", "1.0.4.1"]'),
    ("GET", "/ipinfo/lite/1.0.0.1", b""),
    ("GET", "/ipinfo/lite/1.0.0.1/asn", b""),
    ("GET", "/ipinfo/lookup/1.0.0.1", b""),
    ("GET", "/ipinfo/lookup/1.0.0.1/as", b""),
    ("GET", "/ipinfo/lookup", b""),
    ("GET", "/1.0.0.1", b""),
    ("GET", "/1.0.0.1/org", b""),
    ("GET", "/json", b""),
    ("POST", "/batch", b'["1.0.0.1"]'),
    ("GET", "/lite/1.0.0.1", b""),
    ("GET", "/lite/1.0.0.1/asn", b""),
    ("GET", "/lookup/1.0.0.1", b""),
    ("GET", "/lookup/1.0.0.1/as", b""),
    ("GET", "/lookup", b""),
    ("GET", "/", b""),
)
ROUTE_IDS = [f"{method} {path}" for method, path, _ in ROUTES]
#: The routes that hold data and take a key: all but the lookup page, which has no authorizer on
#: any front (``stacks/fronts/rest_front.py``, ``stacks/fronts/http_front.py``) and no key check behind
#: the url front.
KEYED_ROUTES = tuple(route for route in ROUTES if not is_page_path(route[1].partition("?")[0]))
KEYED_ROUTE_IDS = [f"{method} {path}" for method, path, _ in KEYED_ROUTES]


@pytest.fixture(scope="module", autouse=True)
def loaded(dynalite_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    store = LoaderTable.from_settings(Settings("ipmeta-fronts", dynalite_endpoint, 0.0))
    create_table_if_missing(store.client, store.table_name)
    folder = tmp_path_factory.mktemp("load")
    options = LoadOptions(index_field="asn", flag_column="country")
    driver.run_load([FIXTURE], options, store, LocalStaging(folder / "staging"))
    deps = dependencies.Dependencies(store=store.lookup, pointer_cache_seconds=3600.0)
    deps.api = dataclasses.replace(deps.api, ipinfo_at_root=True)
    dependencies.install(deps)
    yield
    dependencies.install(None)


@pytest.fixture(autouse=True)
def no_function_keys(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # The HTTP front's authorizer reads its secret: here, the test's keys.
    monkeypatch.setattr(authorizer, "api_keys", lambda: HTTP_KEYS)
    key_check.install(key_check.KeyCheck())
    yield
    key_check.install(None)


def answer(response: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
    """Status, body and the headers a client reads, whichever map the front's response uses."""
    headers = {name.lower(): str(value) for name, value in (response.get("headers") or {}).items()}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = ",".join(str(value) for value in values)
    body = response.get("body") or ""
    content = headers.get("content-type", "")
    return int(response["statusCode"]), json.loads(body) if "json" in content else body, headers


@pytest.mark.parametrize("front", [Front.HTTP, Front.URL])
@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=ROUTE_IDS)
def test_every_route_answers_through_every_fronts_event_as_through_rest(
    front: Front, method: str, path: str, body: bytes
) -> None:
    via_rest = answer(invoke(Front.REST, method, path, {}, body, caller=CALLER))
    via_front = answer(invoke(front, method, path, {}, body, caller=CALLER))
    assert via_front == via_rest
    assert via_rest[0] < 500


Request = tuple[str, str, bytes]


def admitted(front: Front, request: Request, headers: Any, query: Any) -> bool:
    """Whether ``front`` lets the request through to the answer: its authorizer (REST, HTTP API),
    or the function itself (url)."""
    method, path, body = request
    if front is not Front.URL:
        # REST's authorizer hands the key to the usage plan, which holds KEY; the HTTP API's checks it.
        return admitted_key(str(front), route_of_path(path.partition("?")[0]), headers, query) == KEY
    target = path + ("&" if "?" in path else "?") + "&".join(f"{n}={v}" for n, v in query) if query else path
    response = invoke(Front.URL, method, target, headers, body, caller=CALLER)
    if response["statusCode"] == 401:
        _, document, _ = answer(response)
        assert "AUTHORIZATION_INVALID" in json.dumps(document)
        return False
    return True


@pytest.mark.parametrize("front", list(Front))
@pytest.mark.parametrize(("method", "path", "body"), KEYED_ROUTES, ids=KEYED_ROUTE_IDS)
def test_every_route_takes_a_key_in_its_familys_forms_only_on_every_front(
    front: Front, method: str, path: str, body: bytes
) -> None:
    key_check.install(key_check.KeyCheck(key_check.StaticKeys({"default": KEY})))
    family = family_of_route(route_of_path(path.partition("?")[0]))
    assert family is not None
    for form in KeyForm:
        headers, query = carrying(form, KEY)
        # Then the key is taken in its family's forms, and in no other
        assert admitted(front, (method, path, body), headers, query) == (form in family.forms), form
        # And a wrong key in the family's own form is refused, as is no key at all
        wrong_headers, wrong_query = carrying(form, KEY[:-1] + "x")
        assert not admitted(front, (method, path, body), wrong_headers, wrong_query), form
    assert not admitted(front, (method, path, body), [], [])


def test_the_lookup_page_needs_no_key_behind_the_url_front_and_a_wrong_one_does_not_matter() -> None:
    key_check.install(key_check.KeyCheck(key_check.StaticKeys({"default": KEY})))
    # Given the function checks keys itself, when the page is asked for with no key or a wrong one
    for headers in ([], [("x-api-key", KEY[:-1] + "x")]):
        event = EVENT_BUILDERS[Front.URL]("GET", "/", headers, b"", CALLER)
        status, body, response_headers = answer(handle(event))
        # Then the page answers: it holds no data, and its lookups go to /v1 with the key
        assert status == 200
        assert response_headers["content-type"].startswith("text/html")
        assert "<html" in body.lower()
    # And a data route next to it still refuses the missing key
    assert not admitted(Front.URL, ("GET", "/json", b""), [], [])


#: A data route of each family, asked with no key.
FAMILY_PATHS = {"v1": "/v1/ip/1.0.0.1", "geoip": "/geoip/v2.1/country/1.0.0.1", "ipinfo": "/ipinfo/1.0.0.1"}


@pytest.mark.parametrize("front", [Front.REST, Front.HTTP])
@pytest.mark.parametrize("family", list(FAMILY_PATHS))
def test_the_local_servers_401_names_its_familys_key_forms_as_each_front(
    store: LoaderTable, front: Front, family: str
) -> None:
    # Given `ipmeta serve --front rest|http --api-key`, which refuses before the function
    with running_api_server(store, api_keys=[KEY], front=front) as server:
        # When a request of the family comes with no key
        status, document = get_json(server, FAMILY_PATHS[family])
    # Then the 401 names the key forms the family takes, and no other
    assert (status, document["code"]) == (401, "AUTHORIZATION_INVALID")
    assert named_forms(document["message"]) == FAMILY_FORMS[family]
