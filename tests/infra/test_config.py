"""Context: documented defaults in cdk.json, typed parsing of -c values, refused combinations."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import App

from ipmeta.schema.settings import Front
from stacks.config import DEFAULTS, ConfigError, IpmetaConfig
from tests.infra.conftest import cdk_json


def _config(**context: Any) -> IpmetaConfig:
    return IpmetaConfig.from_node(App(context=context).node)


def test_cdk_json_lists_every_setting_with_its_default() -> None:
    context = cdk_json()["context"]
    assert {key: context.get(key) for key in DEFAULTS} == dict(DEFAULTS)


def test_cdk_json_runs_the_app_with_the_project_venv() -> None:
    assert cdk_json()["app"] == ".venv/bin/python app.py"


def test_defaults_apply_when_context_is_empty() -> None:
    config = _config()
    assert config.billing_mode == "onDemand"
    assert not config.provisioned
    assert config.deletion_protection is True
    assert config.source_key == "datasets/current.csv"


def test_command_line_strings_are_parsed_to_their_types() -> None:
    config = _config(
        deletionProtection="false",
        mapMaxConcurrency="12",
        corsAllowOrigins="https://a.example, https://b.example",
        usagePlanQuotaPeriod="day",
    )
    assert config.deletion_protection is False
    assert config.map_max_concurrency == 12
    assert config.cors_allow_origins == ["https://a.example", "https://b.example"]
    assert config.usage_plan_quota_period == "DAY"
    assert _config(corsAllowOrigins='["https://c.example"]').cors_allow_origins == ["https://c.example"]


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"uploadTrigger": True, "sourceUrl": "https://example.com/x.csv"}, "uploadTrigger"),
        ({"activationGraceSeconds": 5, "pointerCacheSeconds": 5}, "activationGraceSeconds"),
        ({"billingMode": "PAY_PER_REQUEST"}, "billingMode"),
        ({"mapMaxConcurrency": 1001}, "mapMaxConcurrency"),
        ({"dataMaxAgeHours": 169}, "dataMaxAgeHours"),
        ({"logRetentionDays": 31}, "logRetentionDays"),
        ({"sourceKey": "chunks/x.csv"}, "sourceKey"),
        ({"deletionProtection": "maybe"}, "deletionProtection"),
        ({"lookupMemoryMb": "lots"}, "lookupMemoryMb"),
        ({"apiType": "websocket"}, "apiType"),
        ({"apiKeyCacheSeconds": 3601}, "apiKeyCacheSeconds"),
        ({"lookupReservedConcurrency": -1}, "lookupReservedConcurrency"),
        ({"lookupReservedConcurrency": 1001}, "lookupReservedConcurrency"),
        ({"accessLogSampleRate": 1.5}, "accessLogSampleRate"),
        ({"accessLogSampleRate": "often"}, "accessLogSampleRate"),
        ({"edgeCacheSeconds": -1}, "edgeCacheSeconds"),
        ({"edge": "sometimes"}, "edge"),
        # The cache must fit beside what the warm function already holds
        ({"lookupMemoryMb": 128, "lookupCacheMb": 64}, "lookupCacheMb"),
        ({"lookupCacheMb": -1}, "lookupCacheMb"),
        # The loader must accept the options scheduled loads run with
        ({"sourceOptions": '{"format": "xml"}'}, "sourceOptions"),
        ({"sourceOptions": {"overlap": "last-wins"}}, "sourceOptions"),
        ({"sourceOptions": {"overlaps": "first-wins"}}, "sourceOptions"),
        ({"sourceOptions": {"types": {"lat": "floatx"}}}, "sourceOptions"),
        ({"sourceOptions": {"chunk_size": "abc"}}, "sourceOptions"),
        ({"sourceOptions": {"locations": "/tmp/Locations.csv"}}, "sourceOptions"),
    ],
)
def test_unusable_context_is_refused(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(**context)


def test_the_api_front_is_the_http_api_unless_another_is_named() -> None:
    assert _config().api_type is Front.HTTP
    assert _config(apiType=" URL ").api_type is Front.URL
    assert _config(apiType="rest").api_type is Front.REST
    assert _config().edge is False
    assert _config(apiTracing="true").api_tracing is True
    assert _config(lookupMemoryMb=128, lookupCacheMb=32).lookup_cache_mb == 32


def test_source_options_come_as_an_object_or_as_json_text() -> None:
    assert _config().source_options == {}
    assert _config(sourceOptions='{"format": "mmdb"}').source_options == {"format": "mmdb"}
    assert _config(sourceOptions={"types": "lat=float"}).source_options == {"types": "lat=float"}
