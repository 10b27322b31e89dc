"""Per-container singletons: the data store and the active-version cache.

Built on first use, so importing the API costs no network and tests (and the
local server) can install their own before the first request.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipmeta.lookup import ActiveVersionCache
from ipmeta.settings import Settings
from ipmeta.store import Store


@dataclass
class Dependencies:
    store: Store
    versions: ActiveVersionCache


_current: Dependencies | None = None


def current() -> Dependencies:
    global _current  # noqa: PLW0603 - one set of clients per Lambda container, reused across invocations
    if _current is None:
        settings = Settings.from_environment()
        _current = Dependencies(
            store=Store.from_settings(settings),
            versions=ActiveVersionCache(settings.pointer_cache_seconds),
        )
    return _current


def install(dependencies: Dependencies | None) -> None:
    """Replace the singletons (tests, the local server); None resets to the environment's."""
    global _current  # noqa: PLW0603
    _current = dependencies
