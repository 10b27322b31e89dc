"""The API's pure pieces: body and parameter parsing, caller address, ETags, and the error-code contract."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ipmeta.api.app import cors_config, openapi_document
from ipmeta.api.models import ERROR_CODES
from ipmeta.api.responses import etag_matches
from ipmeta.api.routes.ip_routes import caller_address, parse_batch_body, parse_fields
from ipmeta.lookup.catalog import parse_version
from ipmeta.schema import errors
from ipmeta.schema.errors import IpmetaError
from ipmeta.schema.ips import parse_ip
from ipmeta.schema.settings import ENV_CORS_ORIGINS, ApiSettings

DOCS = Path(__file__).parents[2] / "docs" / "api.md"
#: Domain errors that belong to the loader, not to the API.
LOADER_ONLY = {
    "ActivationConflict",
    "LoadInProgress",
    "LoadRejected",
    "LoadNotFound",
    "LoadIncomplete",
    "WritesThrottled",
}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ("", "BATCH_BODY_NOT_JSON"),
        ("[1.1.1.1]", "BATCH_BODY_NOT_JSON"),
        (b'["1.1.1.1\xb4"]', "BATCH_BODY_NOT_JSON"),  # not UTF-8
        ("[" * 100_000, "BATCH_BODY_NOT_JSON"),  # deep nesting must not crash the parser
        ('{"ips": ["1.1.1.1"]}', "BATCH_BODY_NOT_ARRAY"),
        ('"1.1.1.1"', "BATCH_BODY_NOT_ARRAY"),
        ('["1.1.1.1", 16843009]', "BATCH_ITEM_NOT_STRING"),
        ('["1.1.1.1", null]', "BATCH_ITEM_NOT_STRING"),
        ('["1.1.1.1", ["8.8.8.8"]]', "BATCH_ITEM_NOT_STRING"),
        ('["1.1.1.1", "8.8.8.8", "9.9.9.9"]', "BATCH_TOO_LARGE"),
    ],
)
def test_batch_bodies_are_refused_with_their_own_codes(body: str | bytes, code: str) -> None:
    with pytest.raises(IpmetaError) as raised:
        parse_batch_body(body, limit=2)
    assert raised.value.code == code
    assert raised.value.status == 400


def test_an_empty_batch_is_an_empty_list() -> None:
    assert parse_batch_body("[]", limit=2) == []


def test_the_size_limit_comes_before_item_checks() -> None:
    """A huge body is refused for its size without walking every item."""
    with pytest.raises(errors.BatchTooLarge):
        parse_batch_body("[" + ",".join(["1"] * 5) + "]", limit=2)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        (" , ", None),
        ("asn", {"asn"}),
        ("asn, organization,", {"asn", "organization"}),
    ],
)
def test_fields_parameter(text: str | None, expected: set[str] | None) -> None:
    assert parse_fields(text) == (frozenset(expected) if expected is not None else None)


@pytest.mark.parametrize(("text", "version"), [("v3", 3), ("V12", 12), ("7", 7)])
def test_version_ids(text: str, version: int) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize("text", ["", "v", "vv3", "3.0", "-1", "v١", "v" + "9" * 40])
def test_bad_version_ids(text: str) -> None:
    with pytest.raises(errors.VersionInvalid):
        parse_version(text)


@pytest.mark.parametrize(
    ("source", "forwarded", "hops", "caller"),
    [
        ("203.0.113.9", "1.1.1.1", 0, "203.0.113.9"),  # untrusted: a client can write anything there
        ("203.0.113.9", None, 1, "203.0.113.9"),
        ("203.0.113.9", "6.6.6.6, 1.1.1.1", 1, "1.1.1.1"),  # the proxy appended the real caller
        ("203.0.113.9", "6.6.6.6, 1.1.1.1, 9.9.9.9", 2, "1.1.1.1"),
        ("203.0.113.9", "1.1.1.1", 2, "203.0.113.9"),  # fewer entries than trusted proxies
    ],
)
def test_caller_address(source: str, forwarded: str | None, hops: int, caller: str) -> None:
    assert caller_address(source, forwarded, hops) == parse_ip(caller)


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ('"v1-4-0-ff"', True),
        ('W/"v1-4-0-ff"', True),
        ('"other", "v1-4-0-ff"', True),
        ("*", True),
        ('"v2-4-0-ff"', False),
    ],
)
def test_if_none_match(header: str | None, matches: bool) -> None:
    assert etag_matches(header, '"v1-4-0-ff"') is matches


def _api_error_classes() -> list[type[IpmetaError]]:
    found: list[type[IpmetaError]] = []
    pending: list[type[IpmetaError]] = [IpmetaError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return [cls for cls in found if cls.__module__ == errors.__name__ and cls.__name__ not in LOADER_ONLY]


def test_every_api_error_code_is_in_the_contract() -> None:
    codes = {cls.code for cls in _api_error_classes()}
    assert codes <= set(ERROR_CODES)


def test_the_openapi_document_lists_every_code() -> None:
    schema = openapi_document()["components"]["schemas"]["ErrorResponse"]["properties"]["code"]
    assert schema["enum"] == list(ERROR_CODES)
    assert all(code in openapi_document()["info"]["description"] for code in ERROR_CODES)


def test_the_api_docs_list_every_code() -> None:
    documented = set(re.findall(r"`([A-Z_]{6,})`", DOCS.read_text()))
    assert set(ERROR_CODES) <= documented


def test_no_operation_documents_a_bare_422() -> None:
    for path_item in openapi_document()["paths"].values():
        for operation in path_item.values():
            assert "422" not in operation["responses"]


def test_cors_answers_only_the_configured_origins() -> None:
    config = cors_config(ApiSettings(cors_origins=("https://a.example", "https://b.example")))
    assert config is not None
    assert config.to_dict("https://b.example")["Access-Control-Allow-Origin"] == "https://b.example"
    assert config.to_dict("https://evil.example") == {}
    assert cors_config(ApiSettings(cors_origins=())) is None


def test_cors_origins_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV_CORS_ORIGINS, "https://a.example, https://b.example,")
    assert ApiSettings.from_environment().cors_origins == ("https://a.example", "https://b.example")
    monkeypatch.setenv(ENV_CORS_ORIGINS, "")
    assert ApiSettings.from_environment().cors_origins == ()
