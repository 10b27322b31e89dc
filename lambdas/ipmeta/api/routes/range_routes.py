"""Reverse-lookup routes: the ranges of one value, and the flagged ranges.

Query parameters are declared and validated by powertools; each bad one
still answers with its own code: ``LIMIT_INVALID`` and ``INVALID_TOKEN``
through ``PARAMETER_ERRORS``, and ``FIELD_NOT_INDEXED``, ``VALUE_MISSING``
and ``VALUE_INVALID`` from the listing itself, which knows the version's index.
In a replica region a version's listing answers only once its index entries
arrived there (``ipmeta.lookup.catalog.indexes_arrived``), else ``INDEX_NOT_ARRIVED``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, TypeAlias

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from ipmeta.api import dependencies
from ipmeta.api.models import DatasetRef, FlaggedResponse, RangeEntry, RangesResponse
from ipmeta.api.responses import documented, json_answer, json_model
from ipmeta.lookup.catalog import indexes_arrived, parse_version
from ipmeta.schema import keys
from ipmeta.schema.errors import FieldNotIndexed, FlagsNotIndexed, InvalidToken, IpmetaError, LimitInvalid
from ipmeta.schema.settings import page_token_key

if TYPE_CHECKING:
    # At run time the routes import the listing when they first answer: a lookup never lists,
    # so its cold start does not compile and build ``ipmeta.lookup.reverse``.
    from ipmeta.lookup import reverse

router = APIGatewayRouter()  # type: ignore[no-untyped-call]


#: The parameters both listings take; powertools validates them and documents them in OpenAPI.
#: Their failures answer with these codes (``ipmeta.api.app`` maps them), others with REQUEST_INVALID.
Limit = Annotated[
    int,
    Query(ge=1, le=keys.MAX_PAGE_LIMIT, description=f"Ranges per page, 1 to {keys.MAX_PAGE_LIMIT}"),
]
NextToken = Annotated[
    str | None,
    Query(
        max_length=keys.MAX_PAGE_TOKEN_LENGTH,
        # A token is URL-safe base64 and a dot; anything else is refused before decoding.
        pattern=r"^[A-Za-z0-9_.-]*$",
        description="The `next` token of the previous page",
    ),
]
Version = Annotated[
    str | None,
    Query(max_length=64, description="List from this retained dataset version instead of the active one"),
]
PARAMETER_ERRORS: dict[str, type[IpmetaError]] = {"limit": LimitInvalid, "next": InvalidToken}


Dataset = Annotated[
    str | None,
    Query(
        max_length=keys.MAX_DATASET_NAME_LENGTH,
        description="The dataset to list from; default: the first dataset, in precedence order, whose "
        "active version has the index asked for",
    ),
]
#: A listing of one dataset version: the question asked of its index metadata.
ListingOf: TypeAlias = "Callable[[reverse.ReverseIndexes, keys.KeySpace, int], reverse.Listing]"


def _listing(listing_of: ListingOf, dataset: str | None, requested: str | None) -> reverse.Listing:
    """The listing of the dataset named, or of the first one (in precedence order) that can answer.

    A dataset whose version lacks the index asked for raises ``FieldNotIndexed`` or
    ``FlagsNotIndexed``; without ``dataset=``, the next dataset is tried, and the
    first dataset's error is the answer if none has the index.
    """
    deps = dependencies.current()
    targets = deps.targets(dataset, f"{dataset}:{requested}" if dataset and requested else requested)
    first_error: IpmetaError | None = None
    for target in targets.versions:
        name, version = target.dataset, target.version
        try:
            listing = listing_of(deps.index_catalog(name).get(version), deps.reader(name).space, version)
        except (FieldNotIndexed, FlagsNotIndexed) as error:
            first_error = first_error or error
            continue
        indexes_arrived(deps.reader(name), name, version)
        return listing
    assert first_error is not None  # targets always holds at least one version
    raise first_error


def _page(
    listing_of: ListingOf, limit: int, token_text: str | None, dataset: str | None, requested: str | None
) -> tuple[reverse.Listing, reverse.Page, str | None]:
    """Resolve the dataset and version (the token's, if any), build the listing, read one page."""
    from ipmeta.lookup import reverse

    deps = dependencies.current()
    token = reverse.decode_token(token_text, page_token_key()) if token_text else None
    if token is not None:
        if dataset is not None and dataset != token.dataset:
            raise InvalidToken("next belongs to another dataset than ?dataset=")
        if requested is not None and parse_version(requested) != token.version:
            raise InvalidToken("next belongs to another dataset version than ?version=")
        dataset, requested = token.dataset, keys.format_version(token.version)
    listing = _listing(listing_of, dataset, requested)
    if token is not None and token.scope != listing.scope:
        raise InvalidToken("next belongs to another question; start again without it")
    reader = deps.reader(listing.dataset)
    page = reverse.list_page(reader, listing, limit, token.cursor if token else None, deps.batch_executor)
    next_token = reverse.encode_token(listing, page.cursor, page_token_key()) if page.cursor else None
    return listing, page, next_token


@router.get(
    "/v1/ranges",
    operation_id="listRangesByValue",
    summary="The ranges whose indexed field has a value, in (family, start) order",
    description="Paginated: pass each page's `next` to get the following one; the last page has none. "
    "Pages of one listing always come from the version its first page used.",
    responses=documented("One page of ranges", 400, 404, 500, 503, ok_content=json_model(RangesResponse)),
)
def get_ranges(
    *,
    field: Annotated[
        str | None, Query(description="The indexed field, e.g. asn (the load's --index-field)")
    ] = None,
    value: Annotated[str | None, Query(description="The value whose ranges to list, e.g. 13335")] = None,
    limit: Limit = keys.DEFAULT_PAGE_LIMIT,
    next: NextToken = None,
    dataset: Dataset = None,
    version: Version = None,
) -> Response[str]:
    from ipmeta.lookup import reverse

    listing, page, next_token = _page(
        lambda indexes, space, number: reverse.ranges_of_value(indexes, space, number, field, value),
        limit,
        next,
        dataset,
        version,
    )
    indexed_field, label = listing.scope.removeprefix("value:").split("=", 1)
    answer = RangesResponse(
        field=indexed_field,
        value=label,
        dataset=DatasetRef(name=listing.dataset, version=keys.format_version(listing.version)),
        ranges=[RangeEntry(**reverse.range_entry(item, listing.index.sort_key)) for item in page.items],
        next=next_token,
    )
    # The model checks the shape; its Python form keeps the data's Decimals and bytes for exact_json.
    return json_answer(answer.model_dump())


@router.get(
    "/v1/flagged",
    operation_id="listFlaggedRanges",
    summary="The ranges whose flag column is not empty, in (family, start) order",
    description="Paginated like /v1/ranges. Only flagged ranges are in the index it reads.",
    responses=documented(
        "One page of flagged ranges", 400, 404, 500, 503, ok_content=json_model(FlaggedResponse)
    ),
)
def get_flagged(
    *,
    limit: Limit = keys.DEFAULT_PAGE_LIMIT,
    next: NextToken = None,
    dataset: Dataset = None,
    version: Version = None,
) -> Response[str]:
    from ipmeta.lookup import reverse

    listing, page, next_token = _page(reverse.flagged_ranges, limit, next, dataset, version)
    answer = FlaggedResponse(
        column=listing.scope.removeprefix("flag:"),
        dataset=DatasetRef(name=listing.dataset, version=keys.format_version(listing.version)),
        ranges=[RangeEntry(**reverse.range_entry(item, listing.index.sort_key)) for item in page.items],
        next=next_token,
    )
    return json_answer(answer.model_dump())
