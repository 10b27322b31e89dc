"""Fixtures shared by every test folder."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.infra.conftest import Synthesized

# Powertools would print an EMF metrics blob per request and a log line per
# invocation; tests read responses, not CloudWatch.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")


@pytest.fixture(scope="session")
def synthesized(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """The CDK app, synthesized once per session for the infra tests and the state machine runs."""
    from tests.infra.conftest import synthesize

    return synthesize(tmp_path_factory)
