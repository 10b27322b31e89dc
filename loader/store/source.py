"""Where a load's files are: a local path or an ``s3://bucket/key``, made local for the readers.

The readers themselves (CSV, MaxMind DB, the vendor CSV layouts) are ``loader.formats``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from loader.errors import SourceError


def is_s3_uri(source: str | Path) -> bool:
    return str(source).startswith("s3://")


def split_s3_uri(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    if not bucket or not key:
        raise SourceError(f"{uri}: expected s3://bucket/key")
    return bucket, key


def materialize(source: str | Path, workdir: Path | None = None) -> Path:
    """A local path for ``source``: S3 objects are downloaded (Lambda has /tmp for that)."""
    if not is_s3_uri(source):
        path = Path(source)
        if not path.is_file():
            raise SourceError(f"{path}: no such file")
        return path
    from loader.store import s3

    bucket, key = split_s3_uri(str(source))
    folder = workdir or Path(tempfile.mkdtemp(prefix="ipmeta-source-"))
    target = folder / Path(key).name
    s3.download(bucket, key, target)
    return target
