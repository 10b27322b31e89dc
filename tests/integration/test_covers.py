"""Huge ranges through dynalite and the HTTP API: a cover answers its buckets with one Query.

``0.0.0.0/0`` and ``::/0`` load as a cover each (not 16.7 M items); a lookup
whose bucket Query finds nothing reads the version's cover list once per
container, and smaller ranges inside still win.
"""

from __future__ import annotations

from pathlib import Path

from loader.store.table import LoaderTable
from tests.integration.conftest import RequestCounter, load_csv, running_api_server
from tests.integration.conftest import get_json as get

ROWS = """start,end,label
0.0.0.0,255.255.255.255,all v4
::,ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff,all v6
10.1.2.0,10.1.2.255,a lab
2001:db8::,2001:db8:ffff:ffff:ffff:ffff:ffff:ffff,documentation
"""


def test_covered_buckets_answer_with_the_huge_range_and_smaller_ranges_win(
    counted_store: tuple[LoaderTable, RequestCounter], tmp_path: Path
) -> None:
    store, counter = counted_store
    source = tmp_path / "huge.csv"
    source.write_text(ROWS)
    result = load_csv(store, [source], tmp_path)
    assert result.items < 40
    with running_api_server(store, pointer_cache_seconds=60.0) as server:
        expected = {
            "/v1/ip/99.1.2.3": ("all v4", "10.1.3.0", "255.255.255.255"),
            "/v1/ip/200.0.0.1": ("all v4", "10.1.3.0", "255.255.255.255"),
            "/v1/ip/10.1.2.9": ("a lab", "10.1.2.0", "10.1.2.255"),
            "/v1/ip/3.3.3.3": ("all v4", "0.0.0.0", "10.1.1.255"),
            "/v1/ip/2001:db8:5::1": ("documentation", "2001:db8::", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff"),
            "/v1/ip/4000::1": ("all v6", "2001:db9::", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"),
        }
        for path, (label, start, end) in expected.items():
            status, body = get(server, path)
            assert status == 200, (path, body)
            assert (body["data"]["label"], body["range"]["start"], body["range"]["end"]) == (
                label,
                start,
                end,
            )
        counter.reset()
        get(server, "/v1/ip/77.7.7.7")  # another covered bucket: one Query, the cover list is known
        assert counter.operations() == ["Query"]
