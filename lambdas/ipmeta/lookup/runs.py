"""What one version's Query proves: a run of addresses that all answer alike, for a full or a delta version.

Pure functions of a Query's answer; ``ipmeta.lookup.answers`` sends the Queries,
keeps what they prove in the range cache, and answers from it. Nothing here
reads the table except through ``RangeReader.find_cover``, which the data layer
answers from a version's cover list, read once per container.

**The gap rule.** A Query (``pk = bucket AND sk <= address``, descending,
``Limit=1``) returns the piece that starts last at or before the address. If
the address is within the piece's ``end``, the run is the whole range as the
dataset defines it (it may cross buckets). If the address is past it, no piece
starts between that piece and the address and pieces never overlap, so
``end + 1`` up to the address is a gap. If the Query finds nothing, the bucket
may lie in one of the version's covers (whole buckets a range owns with no
item, ``ipmeta.lookup.covers``); otherwise everything from the bucket's first
address is a gap. A gap never reaches past the address asked (a range may
start right after it) nor out of the bucket queried (another bucket may hold
anything).

**Delta versions.** A delta holds only what changed from its base (a full
version): the new release's ranges that are not identical to one of the
base, *gap items* where the base has ranges and the release has none, and a
cover list of its own (its ranges' covers, and *gap covers* over buckets the
base has ranges in and the release has nothing in). An address is answered by
the delta where a delta item (or cover) holds it, and by the base everywhere
else, so the answer is the new release's exactly. Where the delta's own Query
finds no item holding the address, it proves a *stretch*: the addresses up to
the next delta item of the bucket, which the base answers.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from ipmeta.schema import keys
from ipmeta.schema.ips import Address, address_value
from ipmeta.schema.records import Cover


class RangeReader(Protocol):
    """What a lookup reads from one dataset (``ipmeta.store`` provides it)."""

    @property
    def space(self) -> keys.KeySpace: ...

    def find_range_piece(self, partition_key: str, sort_key: int) -> dict[str, Any] | None: ...

    def find_cover(self, version: int, family: int, bucket: int) -> Cover | None: ...


class Run(NamedTuple):
    """A run of addresses ``start..end`` (inclusive) of one version that answer alike.

    ``data`` is the metadata of the range that holds every address of the run,
    or None when no range holds any of them (a gap). ``whole`` is that range's
    bounds where they reach past the run (a delta's base answers only up to
    the next delta item): the answer names the range, while the run is only
    what may be answered from it without another Query.
    """

    start: int
    end: int
    data: dict[str, Any] | None
    whole: tuple[int, int] | None = None

    @property
    def bounds(self) -> tuple[int, int]:
        """The answering range's first and last address."""
        return self.whole or (self.start, self.end)


class Stretch(NamedTuple):
    """Addresses of one bucket where a delta version holds no item: its base answers them."""

    start: int
    end: int


def full_run(reader: RangeReader, version: int, address: Address, item: dict[str, Any] | None) -> Run:
    """The run a full version's Query proves (the gap rule above)."""
    bucket = keys.bucket_of(address)
    if item is None:
        cover = reader.find_cover(version, address.family, bucket)
        if cover is not None:
            return Run(cover.start, cover.end, cover.data)
        return Run(keys.bucket_bounds(address.family, bucket)[0], address.value, None)
    end = address_value(address.family, item[keys.ATTR_END])
    if address.value > end:
        # The piece may be a range's tail from the bucket before: the gap starts in this one.
        return Run(max(end + 1, keys.bucket_bounds(address.family, bucket)[0]), address.value, None)
    start = address_value(address.family, item[keys.ATTR_START])
    return Run(start, end, item.get(keys.ATTR_DATA, {}))


def delta_own(
    reader: RangeReader, version: int, address: Address, item: dict[str, Any] | None
) -> Run | Stretch:
    """What a delta's own Query proves: the delta's answer, or the stretch its base answers.

    The delta item before the address names in ``next`` where the following one
    starts, and a *marker* at the bucket's offset 0 names the first; a bucket
    with neither has no delta item, so the whole bucket falls through (unless a
    cover of the delta holds it). The stretch never leaves the bucket: the next
    bucket may hold changes.
    """
    family, bucket = address.family, keys.bucket_of(address)
    first, last = keys.bucket_bounds(family, bucket)
    if item is not None and keys.ATTR_START in item:
        start = address_value(family, item[keys.ATTR_START])
        end = address_value(family, item[keys.ATTR_END])
        if address.value <= end:  # held by the delta: a range, or a gap
            return Run(start, end, None if item.get(keys.ATTR_GAP) else item.get(keys.ATTR_DATA, {}))
        return Stretch(max(end + 1, first), _before_next(item, last))
    if item is not None:  # the marker: no delta item from the bucket's start to the first one
        return Stretch(first, _before_next(item, last))
    cover = reader.find_cover(version, family, bucket)
    if cover is not None:
        return Run(cover.start, cover.end, cover.data)
    return Stretch(first, last)


def base_within(base_run: Run, stretch: Stretch) -> Run:
    """The base's run, true of the delta version only inside the stretch it falls through in.

    The base's range is the new release's too (a range only the base has, or
    only the new release has, is a delta item or a gap), so the answer names the
    whole range while the run is cut to the stretch.
    """
    start, end, data = base_run.start, base_run.end, base_run.data
    run = Run(max(start, stretch.start), min(end, stretch.end), data)
    return run if data is None or (run.start, run.end) == (start, end) else run._replace(whole=(start, end))


def _before_next(item: dict[str, Any], last: int) -> int:
    """The last address before the next delta item of the bucket (its last address if none)."""
    following = item.get(keys.ATTR_NEXT)
    return int(following) - 1 if following is not None else last
