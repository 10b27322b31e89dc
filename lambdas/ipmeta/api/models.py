"""Response models: they are the API contract and feed the OpenAPI document."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, RootModel

#: Every code the API answers with, and when: the README and the OpenAPI spec list these.
ERROR_CODES: dict[str, str] = {
    "IP_ADDRESS_INVALID": "400: not an IPv4 or IPv6 address (see the input rules)",
    "VERSION_INVALID": "400: ?version= is not a version id such as v3",
    "REQUEST_INVALID": "400: a query parameter fails its schema (e.g. ?fields= too long)",
    "BATCH_BODY_NOT_JSON": "400: the batch body is not JSON",
    "BATCH_BODY_NOT_ARRAY": "400: the batch body is JSON but not an array",
    "BATCH_ITEM_NOT_STRING": "400: an item of the batch array is not a string",
    "BATCH_TOO_LARGE": "400: more IPs than the configured batch limit",
    "FIELD_NOT_INDEXED": "400: /v1/ranges ?field= is missing or not the field the version is indexed by",
    "VALUE_MISSING": "400: /v1/ranges without ?value=",
    "VALUE_INVALID": "400: /v1/ranges with a value the indexed field cannot hold",
    "LIMIT_INVALID": "400: ?limit= is not an integer from 1 to 1000",
    "INVALID_TOKEN": "400: ?next= is malformed, altered, or from another listing or version",
    "IP_ADDRESS_NOT_FOUND": "404: no range of the dataset holds the address",
    "IP_ADDRESS_RESERVED": "404: a bogon (private, loopback, ...) the dataset has no range for",
    "FIELD_NOT_FOUND": "404: the range has no such field",
    "VERSION_NOT_FOUND": "404: the version is not retained (never existed, loading, or deleted)",
    "FLAGS_NOT_INDEXED": "404: /v1/flagged on a version loaded without --flag-column",
    "ROUTE_NOT_FOUND": "404: no such path or method",
    "INTERNAL_ERROR": "500: a bug or an unexpected failure; the logs have the details",
    "NO_DATASET": "503: no dataset is active yet",
    "DATASET_STALE": "503 (health only): the active dataset is older than the configured maximum age",
}


class RangeModel(BaseModel):
    start: str = Field(description="First address of the range (inclusive)")
    end: str = Field(description="Last address of the range (inclusive)")
    cidrs: list[str] = Field(description="The CIDR blocks that cover start..end exactly")


class DatasetRef(BaseModel):
    version: str = Field(description="Dataset version that answered, e.g. v3")


class LookupResponse(BaseModel):
    ip: str = Field(description="The address looked up, normalized (IPv4-mapped IPv6 as IPv4)")
    bogon: bool = Field(
        description="True for special-purpose addresses (IANA registries: private, CGNAT, loopback, "
        "link-local, documentation, multicast, reserved); such an address answers only when the "
        "dataset has a range for it"
    )
    range: RangeModel
    data: dict[str, Any] = Field(description="The metadata columns of the range, as loaded (or ?fields=)")
    dataset: DatasetRef


class ErrorResponse(BaseModel):
    code: str = Field(
        description="Stable machine-readable error code (see the API docs)",
        json_schema_extra={"enum": list(ERROR_CODES)},
    )
    message: str = Field(description="What went wrong, for people")


class BatchItemError(BaseModel):
    error: ErrorResponse


class BatchResponse(RootModel[dict[str, LookupResponse | BatchItemError]]):
    """Keyed by each input string; each value is a result or ``{"error": {code, message}}``."""


class DatasetInfo(BaseModel):
    id: str = Field(description="Version id, e.g. v3: what ?version= takes")
    status: Literal["active", "retired"]
    loaded_at: str | None = Field(description="When the load started (ISO 8601, UTC)")
    activated_at: str | None = Field(description="When it was last made active (ISO 8601, UTC)")
    source: list[str] = Field(description="The files the version was loaded from")
    checksum: str | None = Field(description="sha256 of the source files, as sha256:<hex>")
    rows: int | None = Field(description="Ranges read from the sources")
    items: int | None = Field(description="Items written (ranges split at bucket edges)")


class DatasetList(BaseModel):
    active: str | None = Field(description="The version lookups answer from, if any")
    datasets: list[DatasetInfo] = Field(description="Retained versions, newest first")


class HealthResponse(BaseModel):
    status: Literal["ok"]
    dataset: str = Field(description="The active version")
    age_seconds: int = Field(description="Seconds since the active version was loaded")
    max_age_seconds: int = Field(description="Beyond this age health answers 503 DATASET_STALE")


class RangeEntry(RangeModel):
    data: dict[str, Any] = Field(description="The metadata columns of the range, as loaded")


class RangesResponse(BaseModel):
    field: str = Field(description="The indexed field")
    value: str = Field(description="The value listed, as the index spells it")
    dataset: DatasetRef
    ranges: list[RangeEntry] = Field(description="Ranges in (family, start) order")
    next: str | None = Field(description="Token for the next page; null on the last page")


class FlaggedResponse(BaseModel):
    column: str = Field(description="The flag column: a range is listed when it is not empty")
    dataset: DatasetRef
    ranges: list[RangeEntry] = Field(description="Flagged ranges in (family, start) order")
    next: str | None = Field(description="Token for the next page; null on the last page")
