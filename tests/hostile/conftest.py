"""The hostile suite's fixtures: the session's in-memory dynalite, shared with the integration tests."""

from __future__ import annotations

from tests.integration.conftest import dynalite_endpoint  # noqa: F401 - a fixture, found by its name
