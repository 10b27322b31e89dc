"""A feed's state in the table (dynalite): per dataset, the release loaded last and failures in a row."""

from __future__ import annotations

import dataclasses

from ipmeta.schema import keys
from ipmeta.schema.settings import Settings
from loader.records import FeedState
from loader.store.table import LoaderTable

RELEASE = FeedState(
    "maxmind:GeoLite2-City", "2026-11-24", "md5:" + "a" * 32, fetched_at="2026-11-25T03:00:00+00:00"
)


def test_each_dataset_keeps_its_feeds_release_under_its_own_key(store: LoaderTable) -> None:
    city, asn = store.for_dataset("city").feed_states, store.for_dataset("asn").feed_states
    assert city.get(RELEASE.feed) is None
    city.put(RELEASE)
    assert city.get(RELEASE.feed) == RELEASE
    # Another dataset's feed, and the default dataset, see nothing of it
    assert asn.get(RELEASE.feed) is None
    assert store.feed_states.get(RELEASE.feed) is None
    assert keys.key_space("city").feed_state == "ds#city#meta#feed"
    # A new release replaces it
    newer = dataclasses.replace(RELEASE, release_id="2026-11-27")
    city.put(newer)
    assert city.get(RELEASE.feed) == newer


def test_a_state_reads_back_whole_in_the_next_run(table_settings: Settings) -> None:
    # Given a release with both validators and no checksum, recorded by one run
    state = FeedState(
        "dbip:city-lite", "2026-11", None, '"e"', "Tue, 24 Nov 2026 03:00:00 GMT", "2026-11-25T03:00:00+00:00"
    )
    LoaderTable.from_settings(table_settings).for_dataset("city").feed_states.put(state)
    # When the next run reaches the table with a client of its own
    again = LoaderTable.from_settings(table_settings).for_dataset("city").feed_states
    # Then it finds that very state; and a state recorded by another feed is none of this one's
    assert again.get("dbip:city-lite") == state
    assert again.get("maxmind:GeoLite2-City") is None


def test_failed_runs_count_up_in_a_row_and_a_success_resets_them(store: LoaderTable) -> None:
    city = store.for_dataset("city").feed_states
    assert [city.count_run(failed=True) for _ in range(3)] == [1, 2, 3]
    # A failure before any release was loaded leaves no release behind
    assert city.get(RELEASE.feed) is None
    assert city.count_run(failed=False) == 0
    assert city.count_run(failed=True) == 1
    # Recording a loaded release is a success too
    city.put(RELEASE)
    assert city.count_run(failed=True) == 1
    assert city.get(RELEASE.feed) == RELEASE
