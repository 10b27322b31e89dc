"""MaxMind's GeoIP2 web service: ``GET /geoip/v2.1/{country|city|insights}/{ip|me}``.

``geoip2.webservice.Client(account_id, key, host=...)`` calls these with HTTP
Basic auth (the front checks the password as an ipmeta key). Each service reads
the datasets the deployment maps to it (``IPMETA_GEOIP2_DATASETS``), else those
a lookup reads, and ``ipmeta.shapes.geoip2_document`` shapes the document. Errors are MaxMind's
``{"code", "error"}`` (``ipmeta.api.app`` maps them, by path, in one place).
"""

from __future__ import annotations

from collections.abc import Callable

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ipmeta.api import dependencies
from ipmeta.api.models import GeoIP2Document, GeoIP2Error
from ipmeta.api.observability import count_lookups
from ipmeta.api.responses import cache_control
from ipmeta.api.routes.ip_routes import caller_of
from ipmeta.lookup.answers import CombinedResult, lookup_address
from ipmeta.schema.bogons import is_bogon
from ipmeta.schema.errors import IpAddressNotFound, IpAddressReserved
from ipmeta.schema.ips import Address, parse_ip
from ipmeta.shapes import exact_json, geoip2_document

router = APIGatewayRouter()  # type: ignore[no-untyped-call]

#: The client's stand-in for "the address this request comes from".
CALLER = "me"


def _error(description: str) -> dict[str, object]:
    return {
        "description": description,
        "content": {geoip2_document.ERROR_CONTENT_TYPE: {"model": GeoIP2Error}},
    }


def _responses(service: str) -> dict[int, object]:
    return {
        200: {
            "description": f"MaxMind's GeoIP2 {service} document",
            "content": {geoip2_document.CONTENT_TYPES[service]: {"model": GeoIP2Document}},
        },
        400: _error(
            "IP_ADDRESS_INVALID, or IP_ADDRESS_RESERVED: a private or reserved address no dataset holds"
        ),
        401: _error("AUTHORIZATION_INVALID: no key, or one no client has (answered by the front)"),
        404: _error("IP_ADDRESS_NOT_FOUND: no dataset mapped to the service holds the address"),
        503: _error("NO_DATASET: none of the datasets is active yet"),
    }


def _address(ip: str) -> Address:
    return caller_of(router.current_event) if ip == CALLER else parse_ip(ip)


def _lookup(service: str, address: Address) -> CombinedResult:
    deps = dependencies.current()
    mapped = deps.api.geoip2_datasets.get(service)
    targets = deps.targets(",".join(mapped) if mapped else None)
    try:
        return lookup_address(deps.lookup_reader, targets, address, deps.batch_executor, deps.ranges)
    finally:
        count_lookups(1)


def answer(service: str, ip: str) -> Response[str]:
    address = _address(ip)
    result = _lookup(service, address)
    sections = [(found.data, found.start, found.end) for _, found in result.found]
    document = geoip2_document.document(service, address, sections)
    if document is None:
        # Datasets held the address, but none has a field this service answers (a cloud list, say).
        if is_bogon(address):
            raise IpAddressReserved(f"{address} is a reserved address; no dataset has {service} data for it")
        raise IpAddressNotFound(f"no dataset has {service} data for {address}")
    return Response(
        status_code=200,
        content_type=geoip2_document.CONTENT_TYPES[service],
        body=exact_json.dumps(document),
        headers=cache_control(dependencies.current().api.cache_max_age_seconds, private=ip == CALLER),
    )


def _route(service: str) -> Callable[[str], Response[str]]:
    def lookup(ip: str) -> Response[str]:
        return answer(service, ip)

    lookup.__name__ = f"geoip2_{service}"
    return lookup


for _service in geoip2_document.SERVICES:
    router.get(
        f"{geoip2_document.PATH_PREFIX}/{_service}/<ip>",
        operation_id=f"geoip2{_service.capitalize()}",
        summary=f"GeoIP2 {_service} web service (MaxMind's document, for MaxMind's clients)",
        description="`ip` is an IPv4 or IPv6 address, or `me` for the caller. HTTP Basic auth: "
        "any account id, an ipmeta API key as the password.",
        responses=_responses(_service),  # type: ignore[arg-type]
        tags=["GeoIP2 web service"],
    )(_route(_service))
