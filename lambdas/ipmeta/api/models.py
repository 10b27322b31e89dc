"""Response models: they are the API contract and feed the OpenAPI document."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class RangeModel(BaseModel):
    start: str = Field(description="First address of the range (inclusive)")
    end: str = Field(description="Last address of the range (inclusive)")
    cidrs: list[str] = Field(description="The CIDR blocks that cover start..end exactly")


class DatasetRef(BaseModel):
    version: str = Field(description="Dataset version that answered, e.g. v3")


class LookupResponse(BaseModel):
    ip: str = Field(description="The address looked up, normalized (IPv4-mapped IPv6 as IPv4)")
    range: RangeModel
    data: dict[str, Any] = Field(description="The metadata columns of the range, as loaded")
    dataset: DatasetRef


class ErrorResponse(BaseModel):
    code: str = Field(description="Stable machine-readable error code")
    message: str = Field(description="What went wrong, for people")
