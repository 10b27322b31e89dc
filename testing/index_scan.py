"""Every entry of a reverse-lookup index, as DynamoDB holds it: what the tests and bench.reverse check.

A whole-index Scan is never a lookup (the API pages one value's partitions), so it
lives here, beside the oracles it is compared with, not in the product's store.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ipmeta.schema import keys
from ipmeta.store.dynamodb import Store, deserialize_item


def scan_index(store: Store, index: keys.IndexSchema) -> Iterator[dict[str, Any]]:
    """Every entry of ``index`` in the store's table, deserialized as lookups read items."""
    pages = store.client.get_paginator("scan").paginate(TableName=store.table_name, IndexName=index.name)
    for page in pages:
        for raw in page.get("Items", []):
            yield deserialize_item(raw)
