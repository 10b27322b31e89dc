"""Response models: they are the API contract and feed the OpenAPI document.

No ``from __future__ import annotations`` here: pydantic would compile every field's
annotation from its text when the class is made, at each cold start of the lookup.
"""

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, RootModel

#: Each model's validator and serializer are built on first use, not at import: a request
#: uses the few models of its route (powertools builds them on the route's first request),
#: and most models only feed the OpenAPI document. Building them all was most of this
#: module's import, which every cold start of the lookup paid.
_BUILT_ON_FIRST_USE = ConfigDict(defer_build=True)

#: Every code the API answers with, and when: the README and the OpenAPI spec list these.
ERROR_CODES: dict[str, str] = {
    "IP_ADDRESS_INVALID": "400: not an IPv4 or IPv6 address (see the input rules)",
    "VERSION_INVALID": "400: ?version= is not v3, or (with several datasets) city:v3,asn:v12",
    "DATASET_INVALID": "400: a dataset name (?datasets=, dataset=) is not lower-case letters, digits and -",
    "REQUEST_INVALID": "400: a query parameter fails its schema (e.g. ?fields= too long)",
    "BATCH_BODY_NOT_JSON": "400: the batch body is not JSON",
    "BATCH_BODY_NOT_ARRAY": "400: the batch body is JSON but not an array",
    "BATCH_ITEM_NOT_STRING": "400: an item of the batch array is not a string",
    "BATCH_TOO_LARGE": "400: more IPs than the configured batch limit",
    "BATCH_ANSWER_TOO_LARGE": "413: the answer would pass what a Lambda response carries (5.8 MB as the "
    "runtime escapes it); send fewer IPs or fewer ?fields=",
    "BATCH_ITEM_TOO_LONG": "400: a batch item is longer than any address (64 characters; 97 for ip/field "
    "on /ipinfo/batch)",
    "FIELD_NOT_INDEXED": "400: /v1/ranges ?field= is missing or not the field the version is indexed by",
    "VALUE_MISSING": "400: /v1/ranges without ?value=",
    "VALUE_INVALID": "400: /v1/ranges with a value the indexed field cannot hold",
    "LIMIT_INVALID": "400: ?limit= is not an integer from 1 to 1000",
    "INVALID_TOKEN": "400: ?next= is malformed, altered, or from another listing or version",
    "AUTHORIZATION_INVALID": "401: no API key in the route family's form, or one no client has",
    "IP_ADDRESS_NOT_FOUND": "404: no range of the dataset holds the address",
    "IP_ADDRESS_RESERVED": "404: a bogon (private, loopback, ...) the dataset has no range for",
    "FIELD_NOT_FOUND": "404: the range has no such field",
    "VERSION_NOT_FOUND": "404: the version is not retained (never existed, loading, or deleted)",
    "DATASET_NOT_FOUND": "404: no dataset of that name (GET /v1/datasets lists them)",
    "FLAGS_NOT_INDEXED": "404: /v1/flagged on a version loaded without --flag-column",
    "ROUTE_NOT_FOUND": "404: no such path or method",
    "INTERNAL_ERROR": "500: a bug or an unexpected failure; the logs have the details",
    "NO_DATASET": "503: no dataset read by the request is active yet (health: one is not active)",
    "INDEX_NOT_ARRIVED": "503: /v1/ranges or /v1/flagged in a replica region before every index entry of "
    "the version reached it (seconds after the version's items); ask again",
    "DATASET_STALE": "503 (health only): an active dataset is older than its maximum age",
    # The local server's own refusals, before the function (API Gateway answers these itself).
    "REQUEST_MALFORMED": "400 (local server): the request line, Content-Length, chunks or a header is bad",
    "REQUEST_TIMEOUT": "408 (local server): the request did not arrive whole within the read timeout",
    "REQUEST_TOO_LARGE": "413: the body is over 10 MB (API Gateway's payload limit), refused unread",
    "URI_TOO_LONG": "414 (local server): the request line is over 65,536 bytes",
    "HEADERS_TOO_LARGE": "431 (local server): a header line, the header count or the header block is too big",
    "NOT_IMPLEMENTED": "501 (local server): a method or a transfer coding the server does not implement",
    "SERVER_BUSY": "503 (local server): every connection is busy with a request",
    "HTTP_VERSION_NOT_SUPPORTED": "505 (local server): not HTTP/1.0 or HTTP/1.1 (HTTP/0.9, HTTP/2 in clear)",
}


class ApiModel(BaseModel):
    """The base of the API's models: each is built on first use."""

    model_config = _BUILT_ON_FIRST_USE


RootT = TypeVar("RootT")


class ApiRootModel(RootModel[RootT]):
    """The base of the API's root models: built on first use, as is ``ApiRootModel[...]`` itself
    (``RootModel[...]`` would build its validator when the class statement names it)."""

    model_config = _BUILT_ON_FIRST_USE


class RangeModel(ApiModel):
    start: str = Field(description="First address of the range (inclusive)")
    end: str = Field(description="Last address of the range (inclusive)")
    cidrs: list[str] = Field(description="The CIDR blocks that cover start..end exactly")


class DatasetRef(ApiModel):
    name: str = Field(description="The dataset, e.g. asn")
    version: str = Field(description="Its version that answered, e.g. v3")


class DatasetAnswer(ApiModel):
    version: str = Field(description="The dataset's version that answered, e.g. v3")
    range: RangeModel | None = Field(description="The dataset's range holding the address; null in a gap")
    data: dict[str, Any] | None = Field(
        description="The metadata columns of that range, as loaded (or ?fields=); null in a gap"
    )


class LookupResponse(ApiModel):
    ip: str = Field(description="The address looked up, normalized (IPv4-mapped IPv6 as IPv4)")
    bogon: bool = Field(
        description="True for special-purpose addresses (IANA registries: private, CGNAT, loopback, "
        "link-local, documentation, multicast, reserved); such an address answers only when a "
        "dataset has a range for it"
    )
    range: RangeModel = Field(
        description="The addresses every dataset that holds this one answers with the same range: "
        "the intersection of their ranges (with one dataset, its range)"
    )
    data: dict[str, Any] = Field(
        description="The merged view: each field from the first dataset, in the deployment's precedence "
        "order, whose range holds the address (or ?fields=)"
    )
    datasets: dict[str, DatasetAnswer] = Field(
        description="Each dataset read, by name, in precedence order: its own version, range and data"
    )
    inactive: list[str] = Field(
        default=[],
        description="Datasets left out because none of their versions is active (also the "
        "X-Ipmeta-Inactive-Datasets header); empty when every dataset answered",
    )


class ErrorResponse(ApiModel):
    code: str = Field(
        description="Stable machine-readable error code (see the API docs)",
        json_schema_extra={"enum": list(ERROR_CODES)},
    )
    message: str = Field(description="What went wrong, for people")


class BatchItemError(ApiModel):
    error: ErrorResponse


class BatchResponse(ApiRootModel[dict[str, LookupResponse | BatchItemError]]):
    """Keyed by each input string; each value is a result or ``{"error": {code, message}}``."""


class DatasetInfo(ApiModel):
    id: str = Field(description="Version id, e.g. v3: what ?version= takes")
    status: Literal["active", "retired"]
    loaded_at: str | None = Field(description="When the load started (ISO 8601, UTC)")
    activated_at: str | None = Field(description="When it was last made active (ISO 8601, UTC)")
    source: list[str] = Field(
        description="The files the version was loaded from, by name (whole paths and URLs only where "
        "the deployment shows them: IPMETA_SHOW_SOURCES)"
    )
    checksum: str | None = Field(description="sha256 of the source files, as sha256:<hex>")
    rows: int | None = Field(description="Ranges read from the sources")
    items: int | None = Field(description="Items written (ranges split at bucket edges)")
    base: str | None = Field(
        default=None,
        description="A delta version's base: the full version it answers through where it holds no "
        "item (null for a full version)",
    )


class DatasetSummary(ApiModel):
    name: str = Field(description="The dataset, e.g. city: what ?datasets= and dataset= take")
    active: str | None = Field(description="The version lookups answer from; null when none is active")
    versions: list[DatasetInfo] = Field(description="Retained versions, newest first")


class DatasetList(ApiModel):
    datasets: list[DatasetSummary] = Field(description="Every dataset, in the lookups' precedence order")


class DatasetHealth(ApiModel):
    status: Literal["ok", "stale", "inactive"]
    version: str | None = Field(description="The active version; null when none is active")
    age_seconds: int | None = Field(description="Seconds since the active version was loaded")
    max_age_seconds: int = Field(description="This dataset's maximum age; beyond it, health answers 503")


class HealthResponse(ApiModel):
    status: Literal["ok", "stale", "inactive"]
    code: str | None = Field(
        default=None, description="With a 503: NO_DATASET (a dataset is not active) or DATASET_STALE"
    )
    message: str | None = Field(default=None, description="With a 503: which datasets, and why")
    datasets: dict[str, DatasetHealth] = Field(description="Each dataset's freshness, by name")


class RangeEntry(RangeModel):
    data: dict[str, Any] = Field(description="The metadata columns of the range, as loaded")


class RangesResponse(ApiModel):
    field: str = Field(description="The indexed field")
    value: str = Field(description="The value listed, as the index spells it")
    dataset: DatasetRef
    ranges: list[RangeEntry] = Field(description="Ranges in (family, start) order")
    next: str | None = Field(description="Token for the next page; null on the last page")


class FlaggedResponse(ApiModel):
    column: str = Field(description="The flag column: a range is listed when it is not empty")
    dataset: DatasetRef
    ranges: list[RangeEntry] = Field(description="Flagged ranges in (family, start) order")
    next: str | None = Field(description="Token for the next page; null on the last page")


# -- the GeoIP2 web service and ipinfo shapes (ipmeta.shapes) ----------------------------------


class GeoIP2Document(ApiModel):
    """MaxMind's GeoIP2 web-service document; a record with no value is left out, as MaxMind does."""

    continent: dict[str, Any] | None = Field(default=None, description="code, geoname_id, names")
    country: dict[str, Any] | None = Field(
        default=None, description="iso_code, geoname_id, names, is_in_european_union (and confidence)"
    )
    registered_country: dict[str, Any] | None = Field(default=None, description="as country")
    represented_country: dict[str, Any] | None = Field(default=None, description="as country, and type")
    city: dict[str, Any] | None = Field(default=None, description="City and Insights: geoname_id, names")
    location: dict[str, Any] | None = Field(
        default=None, description="City and Insights: latitude, longitude, accuracy_radius, time_zone..."
    )
    postal: dict[str, Any] | None = Field(default=None, description="City and Insights: code")
    subdivisions: list[dict[str, Any]] | None = Field(
        default=None, description="City and Insights: largest to smallest, each iso_code, geoname_id, names"
    )
    anonymizer: dict[str, Any] | None = Field(default=None, description="Insights only")
    traits: dict[str, Any] = Field(
        description="ip_address and network always; the ASN dataset's autonomous_system_number and "
        "autonomous_system_organization (City, Insights); network is the largest CIDR around the "
        "address over which every dataset that answered has one range"
    )


class GeoIP2Error(ApiModel):
    code: str = Field(
        description="IP_ADDRESS_INVALID (400), IP_ADDRESS_RESERVED (400), IP_ADDRESS_NOT_FOUND (404), "
        "AUTHORIZATION_INVALID (401, from the front), or one of ipmeta's codes"
    )
    error: str = Field(description="What went wrong, for people")


class IpinfoDetails(ApiModel):
    ip: str
    bogon: bool | None = Field(default=None, description="true for a special-purpose address; else absent")
    city: str | None = None
    region: str | None = None
    country: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code")
    loc: str | None = Field(default=None, description='"latitude,longitude"')
    org: str | None = Field(default=None, description='"AS15169 Google LLC"')
    postal: str | None = None
    timezone: str | None = None


class IpinfoLite(ApiModel):
    """ipinfo Lite's answer (``api.ipinfo.io/lite/{ip}``); a field no dataset holds is left out."""

    ip: str
    bogon: bool | None = Field(default=None, description="true for a special-purpose address; else absent")
    asn: str | None = Field(default=None, description='"AS15169"')
    as_name: str | None = Field(default=None, description='"Google LLC"')
    as_domain: str | None = Field(default=None, description="from an `as_domain` column (IPinfo Lite's)")
    country_code: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code")
    country: str | None = Field(default=None, description="the country's English name")
    continent_code: str | None = Field(default=None, description='"NA", "EU"...')
    continent: str | None = Field(default=None, description='"North America"')


class IpinfoGeo(ApiModel):
    city: str | None = None
    region: str | None = None
    region_code: str | None = Field(default=None, description="the subdivision's ISO 3166-2 code")
    country: str | None = Field(default=None, description="the country's English name")
    country_code: str | None = Field(default=None, description="ISO 3166-1 alpha-2 code")
    continent: str | None = None
    continent_code: str | None = None
    latitude: float | None = Field(default=None, description="a number, with the stored digits")
    longitude: float | None = Field(default=None, description="a number, with the stored digits")
    timezone: str | None = None
    postal_code: str | None = None


class IpinfoAs(ApiModel):
    asn: str = Field(description='"AS15169"')
    name: str | None = Field(default=None, description='"Google LLC"')
    domain: str | None = Field(default=None, description="from an `as_domain` column")
    type: str | None = Field(default=None, description="from an `as_type` column")


class IpinfoCore(ApiModel):
    """ipinfo Core's and Plus's answer (``api.ipinfo.io/lookup/{ip}``); what no dataset holds is left out."""

    model_config = ConfigDict(populate_by_name=True)

    ip: str
    bogon: bool | None = Field(default=None, description="true for a special-purpose address; else absent")
    geo: IpinfoGeo | None = None
    as_: IpinfoAs | None = Field(default=None, alias="as")
    is_anonymous: bool | None = Field(default=None, description="where a dataset holds it (an anonymizer)")
    is_anycast: bool | None = Field(default=None, description="where a dataset holds it (GeoIP2's trait)")
    is_hosting: bool | None = Field(default=None, description="where a dataset holds it (an anonymizer)")
    is_satellite: bool | None = Field(default=None, description="where a dataset holds it (GeoIP2's trait)")


class IpinfoErrorDetail(ApiModel):
    title: str
    message: str


class IpinfoError(ApiModel):
    status: int
    error: IpinfoErrorDetail


class IpinfoBatchResponse(ApiRootModel[dict[str, IpinfoDetails | str | IpinfoError]]):
    """Keyed by each input string: details for ``ip``, the text for ``ip/field``, or an error."""
