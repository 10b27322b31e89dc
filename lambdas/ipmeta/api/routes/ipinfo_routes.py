"""ipinfo's APIs: ``GET /ipinfo/{ip}`` (``/json``, ``/{field}``), the caller, ``POST /ipinfo/batch``,
and the newer Lite (``GET /ipinfo/lite/{ip|me}``) and Core/Plus (``GET /ipinfo/lookup[/{ip|me}]``).

The ipinfo clients (``ipinfo.getHandler(token)``, ``getHandlerLite``, ``getHandlerCore``,
``getHandlerPlus``) send ``Authorization: Bearer`` or ``?token=`` (the front checks it as an
ipmeta key) and read ipinfo's answers, which ``ipmeta.shapes.ipinfo_document`` makes from the
merged view of the datasets the deployment maps to ipinfo (``IPMETA_IPINFO_DATASETS``, else
what a lookup reads).
With ``IPMETA_IPINFO_AT_ROOT`` the same routes answer at the root, so a
client's own ``API_URL`` (no path) works. As ipinfo does, a valid address no
dataset holds answers 200 with the address alone, a bogon ``"bogon": true``, a
malformed address 404 "Wrong ip" (errors: ``ipmeta.api.app``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ipmeta.api import dependencies
from ipmeta.api.models import IpinfoBatchResponse, IpinfoCore, IpinfoDetails, IpinfoError, IpinfoLite
from ipmeta.api.observability import count_lookups
from ipmeta.api.responses import batch_answer, cache_control
from ipmeta.api.routes.ip_routes import MAX_BATCH_ITEM_LENGTH, caller_of, parse_batch_body, raw_body
from ipmeta.lookup.answers import CombinedResult, lookup_address, lookup_addresses
from ipmeta.lookup.catalog import Targets
from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.errors import FieldNotFound, IpAddressNotFound, IpmetaError
from ipmeta.schema.ips import Address, parse_ip
from ipmeta.schema.settings import ApiSettings
from ipmeta.shapes import exact_json, ipinfo_document

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

#: First path segments the root routes leave to the other APIs (``/v1/...`` stays ROUTE_NOT_FOUND)
#: and to the lookup page's static files.
OTHER_APIS = frozenset({"v1", "geoip", "ipinfo", "static"})
#: ``/{ip}/json`` is the whole answer, as ``/{ip}`` is.
WHOLE = "json"
#: A batch item is ``ip`` or ``ip/field``: an address (with a zone id, 64), ``/`` and a field
#: name of at most 32 characters (ipinfo's are at most 8). Longer items refuse the batch, unechoed.
MAX_BATCH_ITEM_LENGTH_WITH_FIELD = MAX_BATCH_ITEM_LENGTH + 1 + 32


@cache
def fields() -> dict[str, tuple[ipinfo_document.Candidate, ...]]:
    """ipinfo's field map, made once per container: a container's settings never change."""
    return ipinfo_document.field_map(dependencies.current().api.ipinfo_fields)


def _targets() -> Targets:
    deps = dependencies.current()
    names = deps.api.ipinfo_datasets
    return deps.targets(",".join(names) if names else None)


def _details(address: Address, result: CombinedResult | None) -> dict[str, Any]:
    data = result.merged_data() if result is not None else None
    return ipinfo_document.details(str(address), data, is_bogon(address), fields())


def merged_data_of(address: Address) -> dict[str, Any] | None:
    """The merged view of the datasets ipinfo reads at ``address``; None where none holds it."""
    deps = dependencies.current()
    targets = _targets()
    try:
        result = lookup_address(deps.lookup_reader, targets, address, deps.batch_executor, deps.ranges)
    except IpAddressNotFound:
        return None  # ipinfo answers any valid address: with the address alone
    finally:
        count_lookups(1)
    return result.merged_data()


def details_of(address: Address) -> dict[str, Any]:
    return ipinfo_document.details(str(address), merged_data_of(address), is_bogon(address), fields())


def _json(body: Any, *, caller: bool = False, cached: bool = True) -> Response[str]:
    """An answer; an address's is cacheable by shared caches, the caller's is ``private``."""
    headers = (
        cache_control(dependencies.current().api.cache_max_age_seconds, private=caller) if cached else None
    )
    return Response(
        status_code=200,
        content_type=content_types.APPLICATION_JSON,
        body=exact_json.dumps(body),
        headers=headers,
    )


def served_at_root() -> bool:
    return dependencies.current().api.ipinfo_at_root


def _check_root(at_root: bool) -> None:
    """The root routes are always registered (tests and the local server can turn them on);
    they answer only where the deployment serves ipinfo at the root."""
    if at_root and not served_at_root():
        raise NotFoundError(router.current_event.path)


def _address(ip: str, *, at_root: bool) -> Address:
    _check_root(at_root)
    if at_root and ip in OTHER_APIS:
        raise NotFoundError(ip)  # another API's path: ROUTE_NOT_FOUND, not "Wrong ip"
    return parse_ip(ip)


def field_text(answer: dict[str, Any], field: str) -> str:
    """One field as ipinfo answers it: its text and a newline."""
    if field not in answer:
        raise FieldNotFound(f"{answer['ip']} has no field {field[:64]!r}")
    return exact_json.plain_text(answer[field]) + "\n"


def batch_answers(texts: list[str]) -> dict[str, Any]:
    """``ip`` or ``ip/field`` per item, each answered once per distinct address."""
    wanted: dict[str, tuple[Address, str] | IpmetaError] = {}
    for text in texts:
        ip, _, field = text.partition("/")
        try:
            wanted[text] = (parse_ip(ip), field)
        except IpmetaError as error:
            wanted[text] = error
    addresses = [value[0] for value in wanted.values() if isinstance(value, tuple)]
    results: dict[Address, CombinedResult | IpmetaError] = {}
    if addresses:
        deps = dependencies.current()
        targets = _targets()
        results = lookup_addresses(deps.lookup_reader, targets, addresses, deps.batch_executor, deps.ranges)
        count_lookups(len(results))
    answers: dict[str, Any] = {}
    # One document per address, shared by its spellings: written and counted once each (batch_json).
    documents: dict[Address, dict[str, Any]] = {}
    for text, value in wanted.items():
        if isinstance(value, IpmetaError):
            answers[text] = ipinfo_document.error_body(*ipinfo_document.WRONG_IP)
            continue
        address, field = value
        if address not in documents:
            outcome = results[address]
            documents[address] = _details(address, outcome if isinstance(outcome, CombinedResult) else None)
        answer = documents[address]
        if field in ("", WHOLE):
            answers[text] = answer
        else:
            answers[text] = answer.get(
                field, ipinfo_document.error_body(404, "Wrong field", f"no field {field[:64]!r}")
            )
    return answers


def _ipinfo_error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {content_types.APPLICATION_JSON: {"model": IpinfoError}}}


_ERRORS: dict[int, Any] = {
    404: _ipinfo_error('A malformed address ("Wrong ip", as ipinfo answers it), or no such field'),
    503: _ipinfo_error("NO_DATASET: none of the datasets is active yet"),
}
_DETAILS: dict[int, Any] = {
    200: {
        "description": "ipinfo's answer",
        "content": {content_types.APPLICATION_JSON: {"model": IpinfoDetails}},
    },
    **_ERRORS,
}
_TEXT: dict[int, Any] = {
    200: {"description": "The field's value and a newline", "content": {"text/plain": {}}},
    **_ERRORS,
}
_BATCH: dict[int, Any] = {
    200: {
        "description": "Keyed by each input",
        "content": {content_types.APPLICATION_JSON: {"model": IpinfoBatchResponse}},
    },
    400: _ipinfo_error("The body is not a JSON array of strings, or holds more than the batch limit"),
    413: _ipinfo_error("BATCH_ANSWER_TOO_LARGE: the answer would not fit a Lambda response"),
    503: _ERRORS[503],
}


def _batch_body() -> dict[str, Any]:
    limit = ApiSettings.from_environment().batch_max_ips
    items = {"type": "string", "maxLength": MAX_BATCH_ITEM_LENGTH_WITH_FIELD}
    schema = {"type": "array", "items": items, "maxItems": limit}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def _field_response(answer: dict[str, Any], field: str, *, caller: bool = False) -> Response[str]:
    if field == WHOLE:
        return _json(answer, caller=caller)
    return Response(
        status_code=200,
        content_type="text/plain; charset=utf-8",
        body=field_text(answer, field),
        headers=cache_control(dependencies.current().api.cache_max_age_seconds, private=caller),
    )


def _handlers(at_root: bool) -> dict[str, Callable[..., Response[str]]]:
    """The four operations, the root's refusing to answer unless the deployment serves the root."""

    def one(ip: str) -> Response[str]:
        return _json(details_of(_address(ip, at_root=at_root)))

    def one_field(ip: str, field: str) -> Response[str]:
        return _field_response(details_of(_address(ip, at_root=at_root)), field)

    def caller() -> Response[str]:
        _check_root(at_root)
        return _json(details_of(caller_of(router.current_event)), caller=True)

    def batch() -> Response[str]:
        _check_root(at_root)
        event = router.current_event
        limit = dependencies.current().api.batch_max_ips
        texts = parse_batch_body(
            raw_body(event.body, event.is_base64_encoded), limit, MAX_BATCH_ITEM_LENGTH_WITH_FIELD
        )
        return batch_answer(batch_answers(texts))

    return {"one": one, "field": one_field, "caller": caller, "batch": batch}


# -- ipinfo's newer APIs: Lite (/lite/{ip}) and Core/Plus (/lookup/{ip}) --------------------------

#: Each newer API's path and shape: ``api.ipinfo.io/lite/{ip}``, ``api.ipinfo.io/lookup/{ip}``.
PRODUCTS: dict[str, Callable[..., dict[str, Any]]] = {
    ipinfo_document.LITE_PATH: ipinfo_document.lite,
    ipinfo_document.CORE_PATH: ipinfo_document.core,
}
#: The newer APIs' name for the caller (``/lite/me``); HandlerCore asks for ``/lookup`` itself.
CALLER = "me"


def product_answer(product: str, address: Address) -> dict[str, Any]:
    shape = PRODUCTS[product]
    return shape(str(address), merged_data_of(address), is_bogon(address), fields())


def _product_handlers(product: str, at_root: bool) -> dict[str, Callable[..., Response[str]]]:
    def address_of(ip: str) -> Address:
        _check_root(at_root)
        return caller_of(router.current_event) if ip == CALLER else parse_ip(ip)

    def one(ip: str) -> Response[str]:
        return _json(product_answer(product, address_of(ip)), caller=ip == CALLER)

    def one_field(ip: str, field: str) -> Response[str]:
        return _field_response(product_answer(product, address_of(ip)), field, caller=ip == CALLER)

    def caller() -> Response[str]:
        return one(CALLER)

    return {"one": one, "field": one_field, "caller": caller}


def _product_responses(model: type[Any], name: str) -> dict[int, Any]:
    ok = {
        "description": f"ipinfo {name}'s answer",
        "content": {content_types.APPLICATION_JSON: {"model": model}},
    }
    return {200: ok, **_ERRORS}


def register_products(prefix: str, *, at_root: bool) -> None:
    """``{prefix}/lite/{ip|me}`` and ``{prefix}/lookup[/{ip|me}]``, each with ``/{field}``. Before
    the classic routes, whose ``{prefix}/<ip>/<field>`` would take ``/lite/8.8.8.8``."""
    suffix = "Root" if at_root else ""
    common: dict[str, Any] = {"tags": ["ipinfo"], "include_in_schema": not at_root}
    for product, model, name in (
        (ipinfo_document.LITE_PATH, IpinfoLite, "Lite"),
        (ipinfo_document.CORE_PATH, IpinfoCore, "Core/Plus"),
    ):
        handlers = _product_handlers(product, at_root)
        base = f"{prefix}/{product}"
        operation = f"ipinfo{product.capitalize()}"  # ipinfoLite, ipinfoLookup
        responses = _product_responses(model, name)
        routes = [
            (f"{base}/<ip>", "one", operation, "one address (`me`: the caller)", responses),
            (f"{base}/<ip>/<field>", "field", f"{operation}Field", "one field as text", _TEXT),
        ]
        if product == ipinfo_document.CORE_PATH:
            routes.append((base, "caller", f"{operation}Caller", "the caller's address", responses))
        for path, handler, operation_id, summary, answers in routes:
            router.get(
                path,
                operation_id=operation_id + suffix,
                summary=f"ipinfo {name}: {summary}",
                responses=answers,
                **common,
            )(handlers[handler])


def register(prefix: str, *, at_root: bool) -> None:
    """The routes under ``prefix``: ``/ipinfo``, or ``""`` (the root: left out of the OpenAPI
    document, and answering only with ``IPMETA_IPINFO_AT_ROOT``)."""
    register_products(prefix, at_root=at_root)
    handlers = _handlers(at_root)
    suffix = "Root" if at_root else ""
    common: dict[str, Any] = {"tags": ["ipinfo"], "include_in_schema": not at_root}
    routes = [
        (f"{prefix}/<ip>", "one", f"ipinfo{suffix}", "ipinfo: one address", _DETAILS),
        (f"{prefix}/<ip>/<field>", "field", f"ipinfoField{suffix}", "ipinfo: one field as text", _TEXT),
        (prefix, "caller", f"ipinfoCaller{suffix}", "ipinfo: the caller's address", _DETAILS),
        (
            f"{prefix}/{WHOLE}",
            "caller",
            f"ipinfoCallerJson{suffix}",
            "ipinfo: the caller's address",
            _DETAILS,
        ),
    ]
    for path, name, operation, summary, responses in routes:
        if not path:
            continue  # the root itself is the lookup page's: at the root, the caller is `/json`
        router.get(path, operation_id=operation, summary=summary, responses=responses, **common)(
            handlers[name]
        )
    router.post(
        f"{prefix}/batch",
        operation_id=f"ipinfoBatch{suffix}",
        summary="ipinfo: many addresses (ip or ip/field) at once",
        responses=_BATCH,
        openapi_extensions=_batch_body(),
        **common,
    )(handlers["batch"])


register(ipinfo_document.PATH_PREFIX, at_root=False)
# Last, after every other API's routes: the root's ``/<ip>/<field>`` would match their paths.
register("", at_root=True)
