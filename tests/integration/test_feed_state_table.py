"""A feed's state in the table (dynalite): per dataset, the release loaded last and failures in a row."""

from __future__ import annotations

from ipmeta.schema import keys
from loader.store.table import LoaderTable

RELEASE = {"feed": "maxmind:GeoLite2-City", "release_id": "2026-11-24", "checksum": "md5:" + "a" * 32}


def test_each_dataset_keeps_its_feeds_release_under_its_own_key(store: LoaderTable) -> None:
    city, asn = store.for_dataset("city").feed_states, store.for_dataset("asn").feed_states
    assert city.read() is None
    city.put(RELEASE)
    assert city.read() == RELEASE
    # Another dataset's feed, and the default dataset, see nothing of it
    assert asn.read() is None
    assert store.feed_states.read() is None
    assert keys.key_space("city").feed_state == "ds#city#meta#feed"
    # A new release replaces it
    newer = {**RELEASE, "release_id": "2026-11-27"}
    city.put(newer)
    assert city.read() == newer


def test_failed_runs_count_up_in_a_row_and_a_success_resets_them(store: LoaderTable) -> None:
    city = store.for_dataset("city").feed_states
    assert [city.count_run(failed=True) for _ in range(3)] == [1, 2, 3]
    # A failure before any release was loaded leaves no release behind
    assert city.read() is None
    assert city.count_run(failed=False) == 0
    assert city.count_run(failed=True) == 1
    # Recording a loaded release is a success too
    city.put(RELEASE)
    assert city.count_run(failed=True) == 1
    assert city.read() == RELEASE
