"""The staging area between the phases of a load: named files under the load's id.

In AWS it is a prefix of the source bucket (``loader.store.s3.S3Staging``); locally a
folder (``LocalStaging``). ``loader.pipeline.staged`` names the files and encodes them.
Readers fetch byte ranges, so a task reads only its part of a large file.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol


class Staging(Protocol):
    @property
    def identity(self) -> str:
        """Where this staging area is (a folder, a bucket and prefix): caches key on it."""
        ...

    def put(self, load_id: str, name: str, data: bytes) -> None: ...

    def put_file(self, load_id: str, name: str, path: Path) -> None:
        """Publish a local file (moved or uploaded); the caller's copy may be gone afterwards."""
        ...

    def get(self, load_id: str, name: str) -> bytes: ...

    def get_range(self, load_id: str, name: str, start: int, end: int) -> bytes:
        """Bytes ``start`` up to (not including) ``end``."""
        ...

    def exists(self, load_id: str, name: str) -> bool: ...

    def delete_load(self, load_id: str) -> None: ...


class LocalStaging:
    def __init__(self, root: Path) -> None:
        self.root = root

    @property
    def identity(self) -> str:
        return str(self.root.resolve())

    def _path(self, load_id: str, name: str) -> Path:
        return self.root / load_id / name

    def put(self, load_id: str, name: str, data: bytes) -> None:
        path = self._path(load_id, name)
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_bytes(data)
        temporary.replace(path)  # atomic: a reader never sees half a file

    def put_file(self, load_id: str, name: str, path: Path) -> None:
        target = self._path(load_id, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        temporary = target.with_name(f".{target.name}.tmp")
        shutil.move(path, temporary)
        temporary.replace(target)

    def get(self, load_id: str, name: str) -> bytes:
        return self._path(load_id, name).read_bytes()

    def get_range(self, load_id: str, name: str, start: int, end: int) -> bytes:
        with self._path(load_id, name).open("rb") as handle:
            handle.seek(start)
            return handle.read(end - start)

    def exists(self, load_id: str, name: str) -> bool:
        return self._path(load_id, name).is_file()

    def delete_load(self, load_id: str) -> None:
        shutil.rmtree(self.root / load_id, ignore_errors=True)
