"""Each front's event, as AWS sends it, through the real handler: one route table answers them all.

The samples in ``tests/fixtures/events/`` are real events of each shape (powertools' test events,
the AWS developer guides' examples; each file names its source). The local server's builders
(``ipmeta_cli.events``) must keep their keys, and the handler must answer the samples themselves.
Then what differs between the fronts and must not change an answer: a function URL's path still
percent-encoded, an HTTP API's already decoded, payload 2.0's repeated query parameters joined with
commas, the caller's address in another place, HEAD, and the function's own key check and access
log behind the url front.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Iterator, Mapping
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any, cast

import pytest

from ipmeta.api import dependencies
from ipmeta.api.fronts import key_check
from ipmeta.api.fronts.credentials import needs_key
from ipmeta.schema.settings import ENV_ACCESS_LOG_SAMPLE_RATE, Front
from ipmeta.store.dynamodb import Store
from ipmeta_cli.events import EVENT_BUILDERS, function_url_event, http_api_event, proxy_event
from ipmeta_cli.server import LocalLambdaContext
from testing.in_process_api import handle, invoke
from testing.stub_store import SlashTwentyFourStore
from tests.authorizer_events import FAMILY_FORMS, basic, named_forms

SAMPLES = Path(__file__).parents[1] / "fixtures" / "events"
CALLER = "198.51.100.23"
KEY = "k3y-of-the-url-front"
#: What a sample holds that a request of ours has not (a client certificate, a JWT authorizer, stage
#: variables), or that payload 2.0 leaves out when the request has none (cookies, a body).
OPTIONAL = {
    "rest": {"version", "requestContext.authorizer", "requestContext.identity.clientCert"},
    "http_api": {"cookies", "requestContext.authentication", "requestContext.authorizer", "stageVariables"},
    "function_url": set(),
}
#: What our request has that a sample has not: the function URL sample is a GET, with no body.
EXTRA = {"rest": set(), "http_api": set(), "function_url": {"body"}}
BUILDERS = {"rest": proxy_event, "http_api": http_api_event, "function_url": function_url_event}


def sample(name: str) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((SAMPLES / f"{name}.json").read_text(encoding="utf-8"))
    assert document["source"].startswith("https://")
    return dict(document["event"])


#: The objects whose keys are the shape's (not a request's header, parameter or variable names).
NESTED = {"requestContext", "identity", "http"}


def keys_of(event: Mapping[str, Any], prefix: str = "") -> set[str]:
    """Every key path of an event's objects (``requestContext.http.method``); header and query
    names are the request's, not the shape's."""
    found = set()
    for name, value in event.items():
        path = f"{prefix}{name}"
        found.add(path)
        if isinstance(value, Mapping) and name in NESTED:
            found |= keys_of(value, path + ".")
    return found


@pytest.fixture(autouse=True)
def store() -> Iterator[SlashTwentyFourStore]:
    stub = SlashTwentyFourStore({"asn": 64500, "org": "Example"}, 3)
    dependencies.install(dependencies.Dependencies(store=cast(Store, stub), pointer_cache_seconds=3600.0))
    key_check.install(key_check.KeyCheck())
    yield stub
    key_check.install(None)
    dependencies.install(None)


def answer(response: Mapping[str, Any]) -> tuple[int, str, dict[str, str]]:
    """Status, body and headers, whichever map the front's response shape puts them in."""
    headers = {name.lower(): str(value) for name, value in (response.get("headers") or {}).items()}
    for name, values in (response.get("multiValueHeaders") or {}).items():
        headers[name.lower()] = ",".join(str(value) for value in values)
    return int(response["statusCode"]), str(response.get("body") or ""), headers


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_local_servers_events_keep_the_shape_of_the_real_ones(name: str) -> None:
    # Given a real sample event of the front, and the local server's event for a request
    real = keys_of(sample(name))
    built = keys_of(BUILDERS[name]("POST", "/v1/batch?fields=asn", {"X-Api-Key": KEY}, b"[]", CALLER))
    # Then the server builds every part of the real shape, and nothing the front does not send
    missing = {key for key in real - built if not any(key.startswith(part) for part in OPTIONAL[name])}
    assert missing == set()
    assert built - real == EXTRA[name]


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_the_real_sample_events_are_answered(name: str) -> None:
    # Given each real sample, asking for /v1/ip/1.1.1.1 with GET
    event = copy.deepcopy(sample(name))
    event.pop("body", None)
    if name == "rest":
        event.update(path="/v1/ip/1.1.1.1", resource="/v1/{proxy+}", httpMethod="GET")
        event["requestContext"].update(path="/v1/ip/1.1.1.1", httpMethod="GET")
    else:
        event["rawPath"] = event["requestContext"]["http"]["path"] = "/v1/ip/1.1.1.1"
        event["requestContext"]["http"]["method"] = "GET"
    # Then the handler answers it, in that front's response shape
    status, body, headers = answer(handle(event))
    assert (status, json.loads(body)["data"]) == (200, {"asn": 64500, "org": "Example"})
    assert headers["etag"]


@pytest.mark.parametrize("front", list(Front))
@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "/v1/ip/1.1.1.1?fields=asn", b""),
        ("GET", "/v1/ip/1.1.1.1/org", b""),
        ("GET", "/v1/ip", b""),
        ("HEAD", "/v1/ip/1.1.1.1", b""),
        ("GET", "/v1/ip/999.1.1.1", b""),
        ("POST", "/v1/batch?fields=org", b'["1.1.1.1", "nope"]'),
        ("GET", "/v1/openapi.json", b""),
        ("GET", "/geoip/v2.1/city/1.1.1.1", b""),
        ("GET", "/geoip/v2.1/country/me", b""),
        ("GET", "/ipinfo/1.1.1.1/org", b""),
        ("POST", "/ipinfo/batch", b'["1.1.1.1/org"]'),
        ("GET", "/ipinfo/lite/1.1.1.1", b""),
        ("DELETE", "/v1/ip/1.1.1.1", b""),
        ("GET", "/nowhere", b""),
    ],
)
def test_every_front_gets_the_rest_fronts_answer(front: Front, method: str, path: str, body: bytes) -> None:
    via_rest = answer(invoke(Front.REST, method, path, {}, body, caller=CALLER))
    via_front = answer(invoke(front, method, path, {}, body, caller=CALLER))
    assert via_front == via_rest


def test_a_function_urls_path_is_decoded_and_an_http_apis_is_not_decoded_twice() -> None:
    # A function URL sends the path as written: %0A is a newline in the address, refused
    refused = invoke(Front.URL, "GET", "/v1/ip/1.1.1.1%0A", caller=CALLER)
    assert json.loads(refused["body"])["code"] == "IP_ADDRESS_INVALID"
    # An address with an escaped character is the address
    found = invoke(Front.URL, "GET", "/v1/ip/%31.1.1.1", caller=CALLER)
    assert json.loads(found["body"])["ip"] == "1.1.1.1"
    # An HTTP API decoded the path already: a literal % stays itself (not read as an escape again)
    event = http_api_event("GET", "/v1/ip/1.1.1.1", {}, b"", CALLER)
    event["rawPath"] = "/v1/ip/1.1.1.1%2541"
    assert json.loads(handle(event)["body"])["message"].startswith("'1.1.1.1%2541'")


@pytest.mark.parametrize("front", [Front.HTTP, Front.URL])
def test_a_repeated_query_parameter_takes_its_last_value_as_on_rest(front: Front) -> None:
    event = EVENT_BUILDERS[front]("GET", "/v1/ip/1.1.1.1?fields=asn&fields=org", {}, b"", CALLER)
    assert event["queryStringParameters"] == {"fields": "asn,org"}  # as payload 2.0 joins them
    assert json.loads(handle(event)["body"])["data"] == {"org": "Example"}


# -- the url front: the key is checked in the function -----------------------------------------------


def keyed() -> None:
    key_check.install(key_check.KeyCheck(key_check.StaticKeys({"team": KEY, "other": "o" * 20})))


@pytest.mark.parametrize(
    ("path", "headers", "admitted"),
    [
        ("/v1/ip/1.1.1.1", {"X-Api-Key": KEY}, True),
        ("/v1/ip/1.1.1.1", {"x-api-key": "o" * 20}, True),
        ("/v1/ip/1.1.1.1", {}, False),
        ("/v1/ip/1.1.1.1", {"x-api-key": KEY[:-1]}, False),
        ("/v1/ip/1.1.1.1", {"Authorization": "Bearer " + KEY}, False),  # not /v1's form
        ("/geoip/v2.1/city/1.1.1.1", {"Authorization": basic("42", KEY)}, True),
        ("/geoip/v2.1/city/1.1.1.1", {"x-api-key": KEY}, False),
        ("/ipinfo/1.1.1.1", {"Authorization": "Bearer " + KEY}, True),
        ("/ipinfo/1.1.1.1?token=" + KEY, {}, True),
        ("/ipinfo/1.1.1.1?token=nope", {}, False),
        ("/ipinfo/1.1.1.1?token=" + KEY + "&token=" + KEY, {}, True),  # one key, twice
        ("/ipinfo/1.1.1.1?token=" + KEY + "&token=nope", {}, False),
        ("/v1/ip/1.1.1.1", [("x-api-key", KEY), ("x-api-key", KEY)], False),  # joined with a comma
    ],
)
def test_the_url_front_admits_a_key_only_in_its_familys_form(
    path: str, headers: Any, admitted: bool, store: SlashTwentyFourStore
) -> None:
    keyed()
    reads_before = store.queries
    status, body, content = answer(invoke(Front.URL, "GET", path, headers, caller=CALLER))
    if admitted:
        assert status == 200
        return
    # Refused before any read, with the family's own error shape
    assert status == 401
    assert store.queries == reads_before
    family = path.split("/")[1]
    document = json.loads(body)
    if family == "geoip":
        assert document["code"] == "AUTHORIZATION_INVALID"
        assert content["content-type"].startswith("application/vnd.maxmind.com-error+json")
        message = document["error"]
    elif family == "ipinfo":
        assert (document["status"], document["error"]["title"]) == (401, "AUTHORIZATION_INVALID")
        message = document["error"]["message"]
    else:
        assert document["code"] == "AUTHORIZATION_INVALID"
        message = document["message"]
    # And the message names the key forms this family takes, and no other
    assert named_forms(message) == FAMILY_FORMS[family]


def test_a_refused_key_is_refused_before_the_parameters_are_validated() -> None:
    keyed()
    status, body, _ = answer(invoke(Front.URL, "GET", "/v1/ranges?limit=zero", caller=CALLER))
    assert (status, json.loads(body)["code"]) == (401, "AUTHORIZATION_INVALID")


def test_a_preflight_needs_no_key() -> None:
    keyed()
    assert invoke(Front.URL, "OPTIONS", "/v1/ip/1.1.1.1", {"Origin": "https://a.example"}, caller=CALLER)[
        "statusCode"
    ] in (200, 204)


def test_the_keys_come_from_the_secret_the_environment_names(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: dict[str, Any] = {}

    def get_secret(name: str, **options: Any) -> dict[str, str]:
        asked.update(name=name, **options)
        return {"team": KEY}

    monkeypatch.setenv("IPMETA_API_KEYS_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:1:secret:keys")
    monkeypatch.setenv("IPMETA_API_KEY_CACHE_SECONDS", "120")
    monkeypatch.setattr("aws_lambda_powertools.utilities.parameters.get_secret", get_secret)
    key_check.install(None)
    assert invoke(Front.URL, "GET", "/v1/ip/1.1.1.1", {"x-api-key": KEY}, caller=CALLER)["statusCode"] == 200
    assert asked == {
        "name": "arn:aws:secretsmanager:us-east-1:1:secret:keys",
        "transform": "json",
        "max_age": 120,
    }


def test_behind_cloudfront_the_clients_authorization_is_read_from_the_copied_header() -> None:
    # Given the origin access control's signature in Authorization, and the client's Basic moved aside
    key_check.install(
        key_check.KeyCheck(
            key_check.StaticKeys({"team": KEY}), edge_authorization_header="x-ipmeta-authorization"
        )
    )
    signature = "AWS4-HMAC-SHA256 Credential=AKIA/20260101/us-east-1/lambda/aws4_request, Signature=ab"
    headers = {"Authorization": signature, "X-Ipmeta-Authorization": basic("42", KEY)}
    assert invoke(Front.URL, "GET", "/geoip/v2.1/city/1.1.1.1", headers, caller=CALLER)["statusCode"] == 200
    # The signature alone is no key, and a client's own Authorization (the batch URL) still is one
    alone = invoke(Front.URL, "GET", "/geoip/v2.1/city/1.1.1.1", {"Authorization": signature}, caller=CALLER)
    assert alone["statusCode"] == 401
    own = {"Authorization": "Bearer " + KEY}
    assert invoke(Front.URL, "POST", "/ipinfo/batch", own, b'["1.1.1.1"]', caller=CALLER)["statusCode"] == 200


def test_the_batch_aliass_url_serves_the_batch_routes_only() -> None:
    key_check.install(key_check.KeyCheck(key_check.StaticKeys({"team": KEY}), batch_alias="batch"))
    context = LocalLambdaContext(invoked_function_arn="arn:aws:lambda:us-east-1:1:function:lookup:batch")
    headers = {"x-api-key": KEY}
    batch = invoke(Front.URL, "POST", "/v1/batch", headers, b'["1.1.1.1"]', caller=CALLER, context=context)
    assert batch["statusCode"] == 200
    lookup = invoke(Front.URL, "GET", "/v1/ip/1.1.1.1", headers, caller=CALLER, context=context)
    assert (lookup["statusCode"], json.loads(lookup["body"])["code"]) == (404, "ROUTE_NOT_FOUND")
    # The unqualified function (the URL behind the origin access control) serves every route
    assert invoke(Front.URL, "GET", "/v1/ip/1.1.1.1", headers, caller=CALLER)["statusCode"] == 200


# -- the url front's access log --------------------------------------------------------------------


def logged_lines(event: dict[str, Any], count: int = 1) -> list[dict[str, Any]]:
    output = io.StringIO()
    with redirect_stdout(output):
        for _ in range(count):
            handle(copy.deepcopy(event))
    return [json.loads(line) for line in output.getvalue().splitlines() if line.startswith("{")]


def test_the_access_log_samples_answers_and_keeps_every_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_ACCESS_LOG_SAMPLE_RATE, "0.1")
    keyed()
    answered = logged_lines(
        function_url_event("GET", "/v1/ip/1.1.1.1", {"x-api-key": KEY}, b"", CALLER), 2000
    )
    assert 100 < len(answered) < 300  # about one in ten
    refused = logged_lines(function_url_event("GET", "/v1/ip/1.1.1.1", {}, b"", CALLER), 50)
    assert len(refused) == 50
    assert set(refused[0]) == {"requestId", "ip", "method", "path", "status", "ms"}
    assert (refused[0]["status"], refused[0]["ip"], refused[0]["method"]) == (401, CALLER, "GET")


def test_without_a_sample_rate_the_function_logs_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_ACCESS_LOG_SAMPLE_RATE, raising=False)
    assert logged_lines(function_url_event("GET", "/nowhere", {}, b"", CALLER), 5) == []


@pytest.mark.parametrize(
    ("method", "path", "needed"),
    [
        ("GET", "/v1/ip/1.1.1.1", True),
        ("POST", "/v1/batch", True),
        ("GET", "/geoip/v2.1/city/1.1.1.1", True),
        ("GET", "/1.1.1.1", True),  # ipinfo at the root
        ("GET", "/staticky", True),  # not the page's folder
        ("OPTIONS", "/v1/ip/1.1.1.1", False),  # a preflight carries no key
        ("GET", "/", False),
        ("HEAD", "/static/page.js", False),
        ("POST", "/", True),  # the page is only read
    ],
)
def test_one_rule_says_which_requests_need_a_key(method: str, path: str, needed: bool) -> None:
    assert needs_key(method, path) is needed
