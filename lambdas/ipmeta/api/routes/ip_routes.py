"""Lookup routes: one IP, one field of one IP, the caller's IP, and a batch.

Each answers from every active dataset (``?datasets=`` narrows, ``?version=``
pins versions; ``ipmeta.lookup.catalog``), one Query per dataset, concurrently
(``ipmeta.lookup.answers``). Routes parse their input and call the pure lookup
functions; every error is raised and turned into a response in ``ipmeta.api.app``.
"""

from __future__ import annotations

import base64
import json
from typing import Any, cast

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter
from aws_lambda_powertools.utilities.data_classes.common import BaseProxyEvent

from ipmeta.api import dependencies
from ipmeta.api.fronts.front_events import FrontEvent
from ipmeta.api.models import BatchResponse
from ipmeta.api.observability import count_lookups
from ipmeta.api.responses import (
    LOOKUP_RESPONSES,
    NotModified,
    batch_answer,
    cache_headers,
    documented,
    etag_matches,
    json_answer,
    json_model,
)
from ipmeta.lookup.answers import CombinedResult, lookup_address, lookup_addresses
from ipmeta.lookup.catalog import MAX_SELECTOR_LENGTH, Targets
from ipmeta.schema.errors import (
    BatchBodyNotArray,
    BatchBodyNotJson,
    BatchItemNotString,
    BatchItemTooLong,
    BatchTooLarge,
    FieldNotFound,
    IpmetaError,
    RequestInvalid,
)
from ipmeta.schema.ips import Address, parse_ip
from ipmeta.schema.settings import ApiSettings
from ipmeta.shapes import ipmeta_document
from ipmeta.shapes.exact_json import plain_text

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

# Declared query parameters (``Annotated[str | None, Query(...)]``, as the reverse
# lookups use) cost powertools about 9 us each per request: measured 38 us per
# request for a route reading two optional strings from the event and 56 us for
# the same route declaring them (``bench/handler.py``'s harness, 2-core dev
# machine), +13% on a whole lookup of ~135 us. On the lookup routes, the hot path,
# these two are therefore read from the event, and documented here;
# ``ipmeta.api.app`` adds them to the OpenAPI operations.
FIELDS_MAX_LENGTH = 1024


def optional_query_string(name: str, description: str, max_length: int) -> dict[str, Any]:
    """An OpenAPI operation's optional string parameter in the query."""
    return {
        "name": name,
        "in": "query",
        "required": False,
        "description": description,
        "schema": {"type": "string", "maxLength": max_length},
    }


FIELDS_PARAMETER = optional_query_string(
    "fields",
    "Comma-separated data attributes to return (e.g. asn,organization); unknown names are left out",
    FIELDS_MAX_LENGTH,
)
DATASETS_PARAMETER = optional_query_string(
    "datasets",
    "Comma-separated datasets to answer from (e.g. city,asn); default: every active "
    "dataset, in the deployment's precedence order",
    MAX_SELECTOR_LENGTH,
)
VERSION_PARAMETER = optional_query_string(
    "version",
    "Answer from retained versions instead of the active ones: v3 when the request "
    "reads one dataset, else one per dataset, e.g. city:v3,asn:v12",
    MAX_SELECTOR_LENGTH,
)
#: The query parameters of each operation, by operationId.
QUERY_PARAMETERS: dict[str, list[dict[str, Any]]] = {
    "lookupIp": [FIELDS_PARAMETER, DATASETS_PARAMETER, VERSION_PARAMETER],
    "lookupIpField": [DATASETS_PARAMETER, VERSION_PARAMETER],
    "lookupCaller": [FIELDS_PARAMETER, DATASETS_PARAMETER, VERSION_PARAMETER],
    "lookupBatch": [FIELDS_PARAMETER, DATASETS_PARAMETER, VERSION_PARAMETER],
}
#: Names the datasets left out of an answer because none of their versions is active.
INACTIVE_HEADER = "X-Ipmeta-Inactive-Datasets"


def query(name: str) -> str | None:
    value: str | None = router.current_event.query_string_parameters.get(name)
    return value


TEXT_FIELD_RESPONSES = documented(
    "The field's value as plain text, followed by a newline",
    304,
    400,
    404,
    500,
    503,
    ok_content={"text/plain": {"schema": {"type": "string"}}},
)


def parse_fields(text: str | None) -> frozenset[str] | None:
    if text is None:
        return None
    if len(text) > FIELDS_MAX_LENGTH:
        raise RequestInvalid(f"fields: at most {FIELDS_MAX_LENGTH} characters")
    names = frozenset(name.strip() for name in text.split(",") if name.strip())
    return names or None


def _targets() -> Targets:
    return dependencies.current().targets(query("datasets"), query("version"))


def _lookup(address: Address) -> CombinedResult:
    deps = dependencies.current()
    targets = _targets()
    try:
        return lookup_address(deps.lookup_reader, targets, address, deps.batch_executor, deps.ranges)
    finally:
        count_lookups(1)


def _answer_headers(result: CombinedResult, etag: str, *, private: bool = False) -> dict[str, str]:
    headers = cache_headers(etag, dependencies.current().api.cache_max_age_seconds, private=private)
    if etag_matches(router.current_event.headers.get("if-none-match"), etag):
        raise NotModified(headers)
    if result.inactive:
        headers[INACTIVE_HEADER] = ",".join(result.inactive)
    return headers


def _cached_json(
    result: CombinedResult, fields: frozenset[str] | None, *, private: bool = False
) -> Response[str]:
    etag = result.etag(",".join(sorted(fields)) if fields else "")
    return json_answer(
        ipmeta_document.document(result, fields), _answer_headers(result, etag, private=private)
    )


@router.get(
    "/v1/ip/<ip>", operation_id="lookupIp", summary="Look up one IP address", responses=LOOKUP_RESPONSES
)
def get_ip(ip: str) -> Response[str]:
    return _cached_json(_lookup(parse_ip(ip)), parse_fields(query("fields")))


@router.get(
    "/v1/ip/<ip>/<field>",
    operation_id="lookupIpField",
    summary="One field of one IP address, as plain text",
    description="`ip` and `bogon` are fields too; any other name is a data attribute of the range.",
    responses=TEXT_FIELD_RESPONSES,
)
def get_ip_field(ip: str, field: str) -> Response[str]:
    result = _lookup(parse_ip(ip))
    try:
        value = result.field(field)
    except KeyError:
        raise FieldNotFound(f"the range of {result.address} has no field {field[:64]!r}") from None
    text = plain_text(value)
    headers = _answer_headers(result, result.etag(f"field:{field}"))
    return Response(
        status_code=200, content_type="text/plain; charset=utf-8", body=text + "\n", headers=headers
    )


def caller_address(source_ip: str, forwarded_for: str | None, trusted_hops: int) -> Address:
    """The caller: API Gateway's source IP, or the address the outermost trusted proxy saw.

    Each proxy appends the address it received from, so with n trusted proxies in
    front of API Gateway the caller is the n-th entry from the right; entries
    further left were written by the client and prove nothing.
    """
    if trusted_hops > 0 and forwarded_for:
        entries = [entry.strip() for entry in forwarded_for.split(",")]
        if len(entries) >= trusted_hops:
            return parse_ip(entries[-trusted_hops])
    return parse_ip(source_ip)


@router.get(
    "/v1/ip",
    operation_id="lookupCaller",
    summary="Look up the caller's IP address",
    responses=LOOKUP_RESPONSES,
)
def get_caller() -> Response[str]:
    return _cached_json(_lookup(caller_of(router.current_event)), parse_fields(query("fields")), private=True)


def caller_of(event: BaseProxyEvent) -> Address:
    """The address of the request's caller (``caller_address``, with the deployment's proxy hops),
    from whichever front's event (``ipmeta.api.fronts.front_events``) the resolver read."""
    return caller_address(
        cast(FrontEvent, event).source_ip,
        event.headers.get("x-forwarded-for"),
        dependencies.current().api.trusted_proxy_hops,
    )


#: The longest item a batch answers item by item: an address is at most 45 characters, 64 with
#: a zone id (refused, but as its own item). The answer is keyed by each item, so a longer item is
#: refused with the whole batch and never echoed: 1,000 items of 6 KB once made a 6.16 MB answer,
#: past Lambda's 6 MB response limit. With this bound 1,000 items key at most 64 KB of the answer.
MAX_BATCH_ITEM_LENGTH = 64


def parse_batch_body(
    body: str | bytes | None, limit: int, max_item_length: int = MAX_BATCH_ITEM_LENGTH
) -> list[str]:
    """The batch's IP strings, or the error that says which rule the body breaks.

    Bytes that are not UTF-8 (or base64 that is not base64) are "not JSON" too:
    ``UnicodeDecodeError`` and ``binascii.Error`` are ``ValueError``s.
    """
    try:
        items = json.loads(body or b"")
    except (ValueError, RecursionError) as error:
        raise BatchBodyNotJson("the batch body must be a JSON array of IP strings") from error
    if not isinstance(items, list):
        raise BatchBodyNotArray(f"the batch body must be a JSON array, not {type(items).__name__}")
    if len(items) > limit:
        raise BatchTooLarge(f"a batch takes at most {limit} IPs; this one has {len(items)}")
    for position, item in enumerate(items):
        if not isinstance(item, str):
            raise BatchItemNotString(f"item {position} of the batch is {type(item).__name__}, not a string")
        if len(item) > max_item_length:
            raise BatchItemTooLong(
                f"item {position} of the batch has {len(item)} characters; at most {max_item_length}"
            )
    return items


def raw_body(body: str | None, is_base64: bool | None) -> str | bytes | None:
    if not is_base64 or body is None:
        return body
    try:
        return base64.b64decode(body, validate=True)
    except ValueError:
        return b"\xff"  # undecodable: parse_batch_body refuses it as not JSON


def _batch_body_schema() -> dict[str, Any]:
    limit = ApiSettings.from_environment().batch_max_ips
    items = {"type": "string", "maxLength": MAX_BATCH_ITEM_LENGTH}
    schema = {"type": "array", "items": items, "maxItems": limit}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


@router.post(
    "/v1/batch",
    operation_id="lookupBatch",
    summary="Look up many IP addresses at once",
    description="A JSON array of IP strings. The answer is keyed by each input string; each value is "
    'a result or `{"error": {"code", "message"}}`. Duplicates are looked up once.',
    responses=documented(
        "One answer per distinct input string", 400, 413, 500, 503, ok_content=json_model(BatchResponse)
    ),
    openapi_extensions=_batch_body_schema(),
)
def post_batch() -> Response[str]:
    deps = dependencies.current()
    event = router.current_event
    texts = parse_batch_body(raw_body(event.body, event.is_base64_encoded), deps.api.batch_max_ips)
    parsed: dict[str, Address | IpmetaError] = {}
    for text in texts:
        try:
            parsed[text] = parse_ip(text)
        except IpmetaError as error:
            parsed[text] = error
    addresses = [value for value in parsed.values() if isinstance(value, Address)]
    results: dict[Address, CombinedResult | IpmetaError] = {}
    if addresses:
        targets = _targets()
        results = lookup_addresses(deps.lookup_reader, targets, addresses, deps.batch_executor, deps.ranges)
        count_lookups(len(results))
    wanted = parse_fields(query("fields"))
    # One document per address, shared by its spellings: written and counted once each (batch_json).
    documents: dict[Address, Any] = {}
    answers: dict[str, Any] = {}
    for text, value in parsed.items():
        outcome = results[value] if isinstance(value, Address) else value
        if isinstance(outcome, IpmetaError):
            answers[text] = {"error": {"code": outcome.code, "message": outcome.message}}
        else:
            assert isinstance(value, Address)
            if value not in documents:
                documents[value] = ipmeta_document.document(outcome, wanted)
            answers[text] = documents[value]
    return batch_answer(answers)
