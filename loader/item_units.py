"""The write units an item takes as the load writes it: in the table, and in each GSI it enters.

DynamoDB bills a put one write unit per KB begun of the item, its index key attributes
included, and each GSI the item carries keys for one more write, of the entry it projects
there (the table's keys, the index's keys and the projected attributes). One function
counts both, on the items as they go to BatchWriteItem: the write task sums it into the
load report (what a load wrote), and ``ipmeta plan`` sums it over the dry run's items (what
a load will write), so the two cannot disagree on what a write costs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from ipmeta.schema import keys
from loader.formats import stored_bytes

#: A write unit covers an item (or GSI entry) of up to 1 KB; a larger one takes one per KB begun.
WRITE_UNIT_BYTES: Final = 1_024


class ItemUnits(NamedTuple):
    """One item's writes: its size as DynamoDB counts it, its table and GSI write units, and the
    size of each GSI entry it makes (by index name)."""

    item_bytes: int
    table: int
    gsi: int
    entries: tuple[tuple[str, int], ...] = ()

    @property
    def total(self) -> int:
        return self.table + self.gsi


def write_units(size: float) -> int:
    """The write units of one item or GSI entry of ``size`` bytes (at least one)."""
    return max(1, math.ceil(size / WRITE_UNIT_BYTES))


def item_units(item: Mapping[str, Any]) -> ItemUnits:
    """``item``'s writes, the item in its Python values (``deserialize_item``)."""
    sizes = {name: len(name.encode()) + stored_bytes(value) for name, value in item.items()}
    size = sum(sizes.values())
    entries = tuple(
        (
            schema.name,
            sum(
                sizes.get(name, 0)
                for name in (
                    keys.PARTITION_KEY,
                    keys.SORT_KEY,
                    schema.partition_key,
                    schema.sort_key,
                    *schema.projected,
                )
            ),
        )
        for schema in keys.INDEXES
        if schema.partition_key in item
    )
    return ItemUnits(size, write_units(size), sum(write_units(entry) for _, entry in entries), entries)


def wire_item_units(wire: Mapping[str, Any]) -> ItemUnits:
    """``item_units`` of an item in DynamoDB's attribute-value form, as BatchWriteItem sends it."""
    # Here, not at the top: the store module brings botocore, and the planner, which imports
    # this module for ``write_units``, is imported by every `ipmeta` command.
    from ipmeta.store.dynamodb import deserialize_item

    return item_units(deserialize_item(wire))
