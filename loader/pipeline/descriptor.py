"""What every task of a load needs to know about it, staged once by ``start``: ``load.json``.

The sources, the options and the checksum travel through the staging area, not
through the state machine's payload (which stays a few ids, whatever the load),
and not through the table (a dry run writes nothing there).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

from loader.options import LoadOptions
from loader.store.staging import Staging

DESCRIPTOR: Final = "load.json"
T = TypeVar("T")


@dataclass(frozen=True)
class Source:
    uri: str  #: a local path or ``s3://bucket/key``
    name: str  #: the file name, as messages show it

    @classmethod
    def of(cls, uri: str | Path) -> Source:
        text = str(uri)
        return cls(text, text.rstrip("/").rsplit("/", 1)[-1])


@dataclass(frozen=True)
class LoadDescriptor:
    load_id: str
    version: int  #: 0 for a dry run, which allocates no version
    sources: tuple[Source, ...]
    options: LoadOptions
    sha256: str
    fingerprint: str
    created_at: float
    #: The full version this load diffs against (``loader.pipeline.diff``), chosen at start; 0: none.
    #: Whether the version is then written as a delta is decided once the diff is known.
    base: int = 0
    #: A full version the release is only measured against, for the guard's change ratio, when it is
    #: written full whatever it changed (``--delta never``, reverse indexes): 0 when ``base`` is set.
    measured: int = 0

    @property
    def dry_run(self) -> bool:
        return self.options.dry_run

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "load_id": self.load_id,
                "version": self.version,
                "sources": [{"uri": source.uri, "name": source.name} for source in self.sources],
                "options": self.options.to_event(),
                "sha256": self.sha256,
                "fingerprint": self.fingerprint,
                "created_at": self.created_at,
                "base": self.base,
                "measured": self.measured,
            }
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> LoadDescriptor:
        raw: dict[str, Any] = json.loads(data)
        return cls(
            load_id=raw["load_id"],
            version=int(raw["version"]),
            sources=tuple(Source(entry["uri"], entry["name"]) for entry in raw["sources"]),
            options=LoadOptions.from_event(raw["options"]),
            sha256=raw["sha256"],
            fingerprint=raw["fingerprint"],
            created_at=float(raw["created_at"]),
            base=int(raw.get("base", 0)),
            measured=int(raw.get("measured", 0)),
        )

    def stage(self, staging: Staging) -> None:
        staging.put(self.load_id, DESCRIPTOR, self.to_json())


def read_descriptor(staging: Staging, load_id: str) -> LoadDescriptor:
    """The load's descriptor: one small read, made by every task (it is what names the load)."""
    return LoadDescriptor.from_json(staging.get(load_id, DESCRIPTOR))


class PerLoad(Generic[T]):
    """A value a task reads once per container and load, such as a staged plan.

    Keyed by where the load is staged and by the descriptor's creation time, so
    a load id used again elsewhere (another table's ``v1`` in tests, a local
    store rebuilt from scratch) never gets another load's plan.
    """

    def __init__(self, read: Callable[[Staging, str], T]) -> None:
        self._read = read
        self._key: tuple[str, str, float] | None = None
        self._value: T | None = None

    def get(self, staging: Staging, load_id: str) -> T:
        key = (staging.identity, load_id, read_descriptor(staging, load_id).created_at)
        if key != self._key or self._value is None:
            self._value = self._read(staging, load_id)
            self._key = key
        return self._value
