"""Reverse-lookup routes: the ranges of one value, and the flagged ranges.

Query parameters are read from the event, as the lookup routes do, so each bad
one answers with its own code (``FIELD_NOT_INDEXED``, ``VALUE_MISSING``,
``VALUE_INVALID``, ``LIMIT_INVALID``, ``INVALID_TOKEN``) rather than a generic
validation error.
"""

from __future__ import annotations

from typing import Any

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ipmeta import keys, reverse
from ipmeta.api import dependencies
from ipmeta.api.models import DatasetRef, FlaggedResponse, RangeEntry, RangesResponse
from ipmeta.api.responses import documented
from ipmeta.errors import InvalidToken
from ipmeta.lookup import parse_version, resolve_version
from ipmeta.settings import page_token_key

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


def _parameter(
    name: str, description: str, schema: dict[str, Any], *, required: bool = False
) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": required, "description": description, "schema": schema}


_PAGE_PARAMETERS = [
    _parameter(
        "limit",
        f"Ranges per page, 1 to {reverse.MAX_LIMIT} (default {reverse.DEFAULT_LIMIT})",
        {"type": "string", "pattern": "^[0-9]+$"},
    ),
    _parameter("next", "The `next` token of the previous page", {"type": "string"}),
    _parameter(
        "version", "List from this retained dataset version instead of the active one", {"type": "string"}
    ),
]
#: The query parameters of each operation, by operationId (``ipmeta.api.app`` documents them).
QUERY_PARAMETERS: dict[str, list[dict[str, Any]]] = {
    "listRangesByValue": [
        _parameter("field", "The indexed field, e.g. asn (the load's --index-field)", {"type": "string"}),
        _parameter("value", "The value whose ranges to list, e.g. 13335", {"type": "string"}),
        *_PAGE_PARAMETERS,
    ],
    "listFlaggedRanges": _PAGE_PARAMETERS,
}


def _query(name: str) -> str | None:
    value: str | None = router.current_event.query_string_parameters.get(name)
    return value


def _page(listing_of: Any) -> tuple[reverse.Listing, reverse.Page, str | None]:
    """Resolve the version (the token's, if any), build the listing, read one page."""
    deps = dependencies.current()
    limit = reverse.parse_limit(_query("limit"))
    token_text = _query("next")
    token = reverse.decode_token(token_text, page_token_key()) if token_text else None
    requested = _query("version")
    if token is not None:
        if requested is not None and parse_version(requested) != token.version:
            raise InvalidToken("next belongs to another dataset version than ?version=")
        requested = keys.format_version(token.version)
    version = resolve_version(deps.store, deps.versions, requested)
    listing: reverse.Listing = listing_of(deps.index_catalog.get(version), version)
    if token is not None and token.scope != listing.scope:
        raise InvalidToken("next belongs to another question; start again without it")
    page = reverse.list_page(deps.store, listing, limit, token.cursor if token else None, deps.batch_executor)
    next_token = reverse.encode_token(listing, page.cursor, page_token_key()) if page.cursor else None
    return listing, page, next_token


@router.get(
    "/v1/ranges",
    operation_id="listRangesByValue",
    summary="The ranges whose indexed field has a value, in (family, start) order",
    description="Paginated: pass each page's `next` to get the following one; the last page has none. "
    "Pages of one listing always come from the version its first page used.",
    responses=documented("One page of ranges", 400, 404, 500, 503),
)
def get_ranges() -> RangesResponse:
    field, value = _query("field"), _query("value")
    listing, page, next_token = _page(
        lambda indexes, version: reverse.ranges_of_value(indexes, version, field, value)
    )
    indexed_field, label = listing.scope.removeprefix("value:").split("=", 1)
    return RangesResponse(
        field=indexed_field,
        value=label,
        dataset=DatasetRef(version=keys.format_version(listing.version)),
        ranges=[RangeEntry(**reverse.range_entry(item, listing.index.sort_key)) for item in page.items],
        next=next_token,
    )


@router.get(
    "/v1/flagged",
    operation_id="listFlaggedRanges",
    summary="The ranges whose flag column is not empty, in (family, start) order",
    description="Paginated like /v1/ranges. Only flagged ranges are in the index it reads.",
    responses=documented("One page of flagged ranges", 400, 404, 500, 503),
)
def get_flagged() -> FlaggedResponse:
    listing, page, next_token = _page(reverse.flagged_ranges)
    return FlaggedResponse(
        column=listing.scope.removeprefix("flag:"),
        dataset=DatasetRef(version=keys.format_version(listing.version)),
        ranges=[RangeEntry(**reverse.range_entry(item, listing.index.sort_key)) for item in page.items],
        next=next_token,
    )
