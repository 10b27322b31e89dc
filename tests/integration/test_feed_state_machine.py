"""The ``feeds`` state machine, executed: Fetch against a fake MaxMind, then the load, then RecordRelease.

The same offline interpreter and Lambda endpoint as ``test_state_machine.py``,
over the definition synthesized with context ``feeds``. The fetch function's
``IPMETA_FEEDS`` is the template's, with MaxMind's host pointed at the fake
server; its secret is in moto's Secrets Manager, read through powertools
parameters; its files go to moto's S3 as multipart uploads; the table is dynalite.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest

from ipmeta.schema.settings import Settings
from loader.export.mmdb_writer import DatabaseMetadata, write_database
from loader.feeds import http_client
from loader.feeds.catalogue import parse_network_lists
from loader.feeds.config import FeedConfig
from loader.pipeline import handlers
from loader.pipeline.fetch import DeployedFeed, decode_feeds, encode_feeds
from loader.records import FeedState
from loader.settings import ENV_CHUNK_PREFIX, ENV_FEEDS, ENV_SOURCE_BUCKET, FEEDS_PREFIX, METRIC_FEED_RUNS
from loader.store.table import LoaderTable
from stacks.constants import FETCH_TASK, LOADER_MODULE
from tests.fakes.releases import maxmind_city_csv_zip, maxmind_tarball, md5_of, mmdb_bytes
from tests.fakes.vendors import Edition, FakeMaxMind, Reply, file_route, serving
from tests.infra.cfn import function_by_handler
from tests.infra.conftest import FEEDS, Synthesized
from tests.integration.conftest import get_json, running_api_server
from tests.integration.feeds import Sleeps, quick_http
from tests.integration.state_machines import BUCKET, LambdaEndpoint, Machine, localize, running_machine
from tests.integration.test_network_lists import tor_release

ACCOUNT, KEY = 42, "state-machine-licence-key"
SECRET = "ipmeta/maxmind"
DATASET = "geolite2-asn"
EDITION = "GeoLite2-ASN"
CSV_DATASET, CSV_EDITION = "city-csv", "GeoLite2-City-CSV"


def edition(date: str, md5: str | None = None) -> Edition:
    mmdb = mmdb_bytes(EDITION, date)
    return Edition(date, maxmind_tarball(EDITION, date, mmdb), md5 or md5_of(mmdb))


class RecordingEndpoint(LambdaEndpoint):
    """The Lambda endpoint, keeping every payload a task received and returned: the execution's history."""

    def __init__(self, tasks_by_function: dict[str, str], s3: Any) -> None:
        super().__init__(tasks_by_function, s3)
        self.history: list[Any] = []

    def invoke(self, function: str, event: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        result = super().invoke(function, event)
        self.history.extend([event, result[0]])
        return result


@dataclass
class FeedMachine:
    machine: Machine
    maxmind: FakeMaxMind
    table: LoaderTable

    @property
    def endpoint(self) -> RecordingEndpoint:
        endpoint = self.machine.endpoint
        assert isinstance(endpoint, RecordingEndpoint)
        return endpoint

    def run(self, feed: str = DATASET) -> dict[str, Any]:
        return self.machine.run(localize(self.machine.definition), {"feed": feed})

    @property
    def dataset(self) -> LoaderTable:
        return self.table.for_dataset(DATASET)

    def feed_files(self) -> dict[str, bytes]:
        s3 = self.endpoint.s3
        listing = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{FEEDS_PREFIX}/{DATASET}/")
        return {
            entry["Key"]: s3.get_object(Bucket=BUCKET, Key=entry["Key"])["Body"].read()
            for entry in listing.get("Contents", [])
        }


def published_failures(printed: str) -> list[tuple[str, float, str]]:
    """The ``FeedFailuresInARow`` metrics the handlers printed (CloudWatch's embedded metric format),
    each with how its run ended, a metric of the same line."""
    metrics = [json.loads(line) for line in printed.splitlines() if line.startswith('{"_aws"')]
    return [
        (metric["feed"], metric["FeedFailuresInARow"][0], run)
        for metric in metrics
        if "FeedFailuresInARow" in metric
        for run, name in METRIC_FEED_RUNS.items()
        if metric.get(name) == [1.0]
    ]


def _deployed_feeds_at(template: dict[str, Any], host: str) -> str:
    """The template's IPMETA_FEEDS, MaxMind's feeds pointed at ``host``; and a CSV edition beside them."""
    _, function = function_by_handler(template, f"{LOADER_MODULE}.{FETCH_TASK}")
    feeds = [
        dataclasses.replace(feed, config=dataclasses.replace(feed.config, host=host))
        if feed.config.vendor == "maxmind"
        else feed
        for feed in decode_feeds(function["Properties"]["Environment"]["Variables"][ENV_FEEDS]).values()
    ]
    csv = FeedConfig("maxmind", CSV_EDITION, "csv", dataset=CSV_DATASET, host=host, secret=SECRET)
    return encode_feeds([*feeds, DeployedFeed(csv)])


@pytest.fixture
def feed_machine(
    synthesized: Synthesized,
    table_environment: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[FeedMachine]:
    if shutil.which("node") is None:
        pytest.fail("the state machine tests need node")
    template = synthesized.templates[FEEDS]
    monkeypatch.setenv(ENV_SOURCE_BUCKET, BUCKET)
    # The handlers' metric lines are part of what a run does (the tests turn metrics off elsewhere)
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    # What handlers left unflushed while metrics were off (a disabled flush keeps them) is not this run's
    handlers.metrics.clear_metrics()
    monkeypatch.setenv(ENV_CHUNK_PREFIX, "chunks")
    # The vendor's retries within one invocation, without waiting; the state machine's own come after.
    # (The handler's settings carry its deadline, a minute before the invocation's end; the fetch
    # handler imports the client when first called.)
    monkeypatch.setattr(http_client, "HttpClient", lambda settings: quick_http(Sleeps(), attempts=1))
    csv = Edition("2026-11-24", maxmind_city_csv_zip("2026-11-24"), md5_of(b"csv release"))
    editions = {EDITION: edition("2026-11-24"), CSV_EDITION: csv}
    with FakeMaxMind(ACCOUNT, KEY, editions) as maxmind:
        monkeypatch.setenv(ENV_FEEDS, _deployed_feeds_at(template, maxmind.api.url))
        with running_machine(
            template, tmp_path, monkeypatch, endpoint=RecordingEndpoint, seed=_vendor_secret
        ) as machine:
            yield FeedMachine(machine, maxmind, LoaderTable.from_settings(table_environment))


def _vendor_secret(s3: Any) -> None:
    """The feed's MaxMind account, in the secret the stack names (the bucket starts empty)."""
    secrets = boto3.client("secretsmanager", region_name="us-east-1")
    secrets.create_secret(Name=SECRET, SecretString=json.dumps({"account_id": ACCOUNT, "license_key": KEY}))


def test_a_new_release_is_fetched_loaded_and_remembered_and_the_next_run_is_unchanged(
    feed_machine: FeedMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    # When the feed's schedule starts a run, {"feed": "geolite2-asn"}
    first = feed_machine.run()
    # Then the release is fetched into the bucket, loaded into the feed's dataset, and remembered
    assert first["status"] == "SUCCEEDED", first
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) == first["output"]["version"] == 1
    assert list(feed_machine.feed_files()) == [f"{FEEDS_PREFIX}/{DATASET}/{EDITION}.mmdb"]
    state = feed_machine.dataset.feed_states.get(f"maxmind:{EDITION}")
    assert state is not None
    assert state.release_id == "2026-11-24"
    # And the activation's line says what the load wrote and how long it took, beside the run's
    printed = capsys.readouterr().out
    assert published_failures(printed) == [(DATASET, 0, "loaded")]
    [activated] = [json.loads(line) for line in printed.splitlines() if '"DatasetActivated"' in line]
    assert activated["dataset"] == DATASET
    assert activated["ItemsWritten"][0] == feed_machine.dataset.loads.list_all()[0].items_written > 0
    assert activated["LoadSeconds"][0] > 0
    # When the next run finds the same release
    feed_machine.maxmind.api.forget()
    feed_machine.maxmind.storage.forget()
    again = feed_machine.run()
    # Then it ends as unchanged after the metadata request, and starts no load
    assert again["status"] == "SUCCEEDED", again
    assert again["output"]["status"] == "unchanged"
    assert published_failures(capsys.readouterr().out) == [(DATASET, 0, "unchanged")]
    assert feed_machine.maxmind.api.paths() == ["/geoip/updates/metadata"]
    assert feed_machine.maxmind.storage.paths() == []
    assert [load.version for load in feed_machine.dataset.loads.list_all()] == [1]
    # And the licence key is in no state's input or output
    assert KEY not in json.dumps(feed_machine.endpoint.history)
    assert KEY not in json.dumps([first, again])


def test_a_bad_release_fails_the_run_loads_nothing_and_keeps_the_previous_version(
    feed_machine: FeedMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the first release loaded
    assert feed_machine.run()["status"] == "SUCCEEDED"
    files = feed_machine.feed_files()
    assert published_failures(capsys.readouterr().out) == [(DATASET, 0, "loaded")]
    # When the next release's .mmdb is not the one its md5 names
    feed_machine.maxmind.editions[EDITION] = edition("2026-11-27", md5="0" * 32)
    failed = feed_machine.run()
    # Then Fetch fails into Abort, and the run ends as failed with the feed's error
    assert failed["status"] == "FAILED", failed
    assert "ChecksumMismatch" in failed["cause"]
    kinds = [(event["type"], event["state"]) for event in failed["events"]]
    assert ("StateCaught", "Fetch") in kinds
    assert ("StateFailed", "LoadFailed") in kinds
    # And nothing changed: version 1 serves, from the files it was loaded from, no upload is left open
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) == 1
    assert [load.version for load in feed_machine.dataset.loads.list_all()] == [1]
    assert feed_machine.feed_files() == files
    assert feed_machine.endpoint.s3.list_multipart_uploads(Bucket=BUCKET).get("Uploads", []) == []
    # And the failure counts towards the feed's alarm; the release remembered is still the first
    assert published_failures(capsys.readouterr().out) == [(DATASET, 1, "failed")]
    state = feed_machine.dataset.feed_states.get(f"maxmind:{EDITION}")
    assert state is not None
    assert state.release_id == "2026-11-24"
    # When the vendor publishes a good release, the next run loads it and the count starts again
    feed_machine.maxmind.editions[EDITION] = edition("2026-11-28")
    loaded = feed_machine.run()
    assert loaded["status"] == "SUCCEEDED", loaded
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) == 2
    assert published_failures(capsys.readouterr().out) == [(DATASET, 0, "loaded")]


def test_a_refused_key_fails_at_once_and_counts_each_failed_run(
    feed_machine: FeedMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    feed_machine.maxmind.license_key = "rotated-by-the-vendor"
    for expected in (1, 2):
        failed = feed_machine.run()
        assert failed["status"] == "FAILED", failed
        assert "FeedAuthRefused" in failed["cause"]
        assert not [event for event in failed["events"] if event["type"] == "StateRetried"]
        assert published_failures(capsys.readouterr().out) == [(DATASET, expected, "failed")]
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) is None
    assert KEY not in json.dumps(feed_machine.endpoint.history)


def test_a_vendor_unavailable_is_retried_by_the_state_machine(feed_machine: FeedMachine) -> None:
    # The first invocation meets a 503 (its one attempt), Fetch's Retry runs it again
    feed_machine.maxmind.api.inject(Reply(503))
    result = feed_machine.run()
    assert result["status"] == "SUCCEEDED", result
    assert [event["state"] for event in result["events"] if event["type"] == "StateRetried"] == ["Fetch"]
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) == 1


def test_an_unknown_feed_fails_the_run_without_touching_any_dataset(feed_machine: FeedMachine) -> None:
    failed = feed_machine.run("no-such-feed")
    assert failed["status"] == "FAILED", failed
    assert "FeedConfigInvalid" in failed["cause"]
    assert feed_machine.maxmind.api.paths() == []


def test_start_finding_the_release_already_active_records_it(
    feed_machine: FeedMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the release loaded, and then its record lost (another feed's state in its place)
    assert feed_machine.run()["status"] == "SUCCEEDED"
    capsys.readouterr()
    feed_machine.dataset.feed_states.put(FeedState("maxmind:another", "x"))
    # When the feed runs again, it fetches (no state of its own), and Start finds the bytes active
    feed_machine.maxmind.storage.forget()
    again = feed_machine.run()
    assert again["status"] == "SUCCEEDED", again
    assert len(feed_machine.maxmind.storage.paths()) == 1
    assert again["output"]["status"] == "unchanged"
    # (RecordUnchangedRelease: the run counts as unchanged, not as a load)
    assert published_failures(capsys.readouterr().out) == [(DATASET, 0, "unchanged")]
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) == 1
    # Then the release is remembered, and the run after it costs the metadata request only
    feed_machine.maxmind.api.forget()
    assert feed_machine.run()["output"]["status"] == "unchanged"
    assert feed_machine.maxmind.api.paths() == ["/geoip/updates/metadata"]


def test_a_csv_edition_loads_its_blocks_with_its_locations_from_the_bucket(feed_machine: FeedMachine) -> None:
    result = feed_machine.run(CSV_DATASET)
    assert result["status"] == "SUCCEEDED", result
    city = feed_machine.table.for_dataset(CSV_DATASET)
    assert city.lookup.read_active_version(consistent=True) == 1
    [load] = city.loads.list_all()
    prefix = f"s3://{BUCKET}/{FEEDS_PREFIX}/{CSV_DATASET}"
    assert list(load.sources) == [
        f"{prefix}/GeoLite2-City-Blocks-IPv4.csv",
        f"{prefix}/GeoLite2-City-Blocks-IPv6.csv",
    ]
    assert (load.options.format, load.options.locations) == (
        "geoip2-csv",
        f"{prefix}/GeoLite2-City-Locations-en.csv",
    )
    assert load.items_written > 0


def asn_edition(date: str, first_network: int) -> Edition:
    """An ASN release of 200 /24s from ``first_network``.0.0.0 on, each its own AS (so none coalesce)."""
    ranges = [
        (
            4,
            (first_network << 24) | (n << 8),
            (first_network << 24) | (n << 8) | 0xFF,
            {"autonomous_system_number": n},
        )
        for n in range(1, 201)
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "db.mmdb"
        write_database(ranges, path, DatabaseMetadata(EDITION, {"en": date}))
        mmdb = path.read_bytes()
    return Edition(date, maxmind_tarball(EDITION, date, mmdb), md5_of(mmdb))


def test_a_scheduled_release_that_changed_too_much_is_held_alarmed_and_not_loaded_again(
    feed_machine: FeedMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given a release of 200 ranges loaded by the feed's schedule
    feed_machine.maxmind.editions[EDITION] = asn_edition("2026-11-24", 20)
    assert feed_machine.run()["status"] == "SUCCEEDED"
    capsys.readouterr()
    # When the next release moves every range elsewhere
    feed_machine.maxmind.editions[EDITION] = asn_edition("2026-11-27", 30)
    held = feed_machine.run()
    # Then the run succeeds without activating: version 2 is held, version 1 serves
    assert held["status"] == "SUCCEEDED", held
    assert held["output"]["activation"]["status"] == "held"
    assert feed_machine.dataset.lookup.read_active_version(consistent=True) == 1
    assert [(load.version, str(load.status)) for load in feed_machine.dataset.loads.list_all()] == [
        (1, "activated"),
        (2, "held"),
    ]
    # And the alarm's metric is out, for this dataset
    printed = capsys.readouterr().out
    [line] = [json.loads(text) for text in printed.splitlines() if '"ReleaseHeld"' in text]
    assert (line["ReleaseHeld"], line["dataset"]) == ([1.0], DATASET)
    assert '"DatasetActivated"' not in printed
    # When the schedule comes again, on the same release: it is unchanged, no load starts
    again = feed_machine.run()
    assert again["output"]["status"] == "unchanged"
    assert [load.version for load in feed_machine.dataset.loads.list_all()] == [1, 2]


# -- the network lists: the one path `ipmeta update --feed network:...` takes, as a scheduled run --

NETWORK = "network"
NETWORK_SAMPLES = Path(__file__).parent.parent / "fixtures" / "network"
NETWORK_LISTS = {"aws": "aws.json", "tor": "tor.txt", "apple-relay": "apple-relay.csv"}


def network_release(tor: bytes | None = None) -> dict[str, bytes]:
    published = {file: (NETWORK_SAMPLES / file).read_bytes() for file in NETWORK_LISTS.values()}
    return {**published, "tor.txt": tor} if tor is not None else published


@dataclass
class NetworkMachine:
    machine: Machine
    files: dict[str, bytes]
    table: LoaderTable

    def run(self) -> dict[str, Any]:
        return self.machine.run(localize(self.machine.definition), {"feed": NETWORK})

    @property
    def dataset(self) -> LoaderTable:
        return self.table.for_dataset(NETWORK)

    def list_files(self) -> dict[str, bytes]:
        s3 = self.machine.endpoint.s3
        listing = s3.list_objects_v2(Bucket=BUCKET, Prefix=f"{FEEDS_PREFIX}/{NETWORK}/")
        return {
            entry["Key"].removeprefix(f"{FEEDS_PREFIX}/{NETWORK}/"): s3.get_object(
                Bucket=BUCKET, Key=entry["Key"]
            )["Body"].read()
            for entry in listing.get("Contents", [])
        }


@pytest.fixture
def network_machine(
    synthesized: Synthesized,
    table_environment: Settings,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> Iterator[NetworkMachine]:
    """The ``feeds`` template's machine, its network feed's lists read from a fake server (a mirror)."""
    template = synthesized.templates[FEEDS]
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    handlers.metrics.clear_metrics()
    monkeypatch.setattr(http_client, "HttpClient", lambda settings: quick_http(Sleeps(), attempts=1))
    files = network_release()
    # The route reads ``files`` as it is at each request: a test publishes by changing it.
    with serving(file_route(files)) as server:
        _, function = function_by_handler(template, f"{LOADER_MODULE}.{FETCH_TASK}")
        deployed = decode_feeds(function["Properties"]["Environment"]["Variables"][ENV_FEEDS])[NETWORK]
        # The deployed lists, each named at its mirror on the fake server
        names = [chosen.entry.name for chosen in parse_network_lists(deployed.config.edition)]
        assert names == list(NETWORK_LISTS)
        mirrored = ",".join(f"{name}={server.url}/files/{NETWORK_LISTS[name]}" for name in names)
        config = dataclasses.replace(deployed.config, edition=mirrored)
        monkeypatch.setenv(ENV_FEEDS, encode_feeds([DeployedFeed(config, deployed.options)]))
        with running_machine(
            template, tmp_path, monkeypatch, endpoint=RecordingEndpoint, seed=_no_seed
        ) as machine:
            yield NetworkMachine(machine, files, LoaderTable.from_settings(table_environment))


def _no_seed(s3: Any) -> None:
    """The bucket starts empty: the first run fetches every list."""


def test_a_scheduled_network_run_loads_every_list_into_one_dataset_then_is_unchanged(
    network_machine: NetworkMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    # When the network feed's schedule starts a run, {"feed": "network"}
    first = network_machine.run()
    # Then the three lists are fetched, loaded into one dataset with every kind, and kept
    assert first["status"] == "SUCCEEDED", first
    assert network_machine.dataset.lookup.read_active_version(consistent=True) == 1
    [load] = network_machine.dataset.loads.list_all()
    assert (load.options.format, load.options.overlaps) == ("network", "merge")
    assert sorted(source.rsplit("/", 1)[-1] for source in load.sources) == [
        "apple-relay-1.csv",
        "aws-1.json",
        "tor-1.txt",
    ]
    # The new files were promoted from incoming/ once the version was active
    kept = network_machine.list_files()
    assert {name for name in kept if "/" not in name} == {"aws-1.json", "tor-1.txt", "apple-relay-1.csv"}
    assert kept["tor-1.txt"] == network_machine.files["tor.txt"]
    states = network_machine.dataset.list_states
    assert all(states.get(f"network:{name}") is not None for name in NETWORK_LISTS)
    # And one Query answers an AWS range that is also a Tor exit with both kinds
    with running_api_server(network_machine.table) as server:
        status, body = get_json(server, "/v1/ip/3.5.140.10")
    assert status == 200, body
    assert body["data"]["network_kinds"] == ["cloud", "tor"]
    assert published_failures(capsys.readouterr().out) == [(NETWORK, 0, "loaded")]
    # When the next run finds every list unchanged, it ends before any load
    again = network_machine.run()
    assert again["output"]["status"] == "unchanged", again
    assert [load.version for load in network_machine.dataset.loads.list_all()] == [1]
    assert published_failures(capsys.readouterr().out) == [(NETWORK, 0, "unchanged")]


def test_a_scheduled_tor_release_that_changes_90_percent_is_held_alarmed_and_not_loaded_again(
    network_machine: NetworkMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    # Given the lists loaded with a Tor list of 100 exits
    network_machine.files.update(network_release(tor_release(100)))
    assert network_machine.run()["status"] == "SUCCEEDED"
    capsys.readouterr()
    # When the next Tor release replaces 90 of them
    moved = tor_release(10) + tor_release(90, first=1000)
    network_machine.files["tor.txt"] = moved
    held = network_machine.run()
    # Then version 2 is written and held, version 1 serves, and the alarm's metric is out
    assert held["status"] == "SUCCEEDED", held
    assert held["output"]["activation"]["status"] == "held"
    assert network_machine.dataset.lookup.read_active_version(consistent=True) == 1
    loads = network_machine.dataset.loads.list_all()
    assert [(load.version, str(load.status)) for load in loads] == [(1, "activated"), (2, "held")]
    assert "tor: changes 90% of its ranges, above 50%" in loads[1].options.held_by
    printed = capsys.readouterr().out
    [line] = [json.loads(text) for text in printed.splitlines() if '"ReleaseHeld"' in text]
    assert (line["ReleaseHeld"], line["dataset"]) == ([1.0], NETWORK)
    # And the held release is kept, so the next scheduled run is unchanged: no loop
    assert network_machine.list_files()["tor-1.txt"] == moved
    again = network_machine.run()
    assert again["output"]["status"] == "unchanged", again
    assert [load.version for load in network_machine.dataset.loads.list_all()] == [1, 2]


def test_a_broken_list_fails_the_run_and_keeps_the_files_and_states_it_had(
    network_machine: NetworkMachine, capsys: pytest.CaptureFixture[str]
) -> None:
    assert network_machine.run()["status"] == "SUCCEEDED"
    before = network_machine.list_files()
    state = network_machine.dataset.list_states.get("network:aws")
    # When AWS publishes an HTML page in place of its JSON
    network_machine.files["aws.json"] = b"<html><body>captive portal</body></html>"
    failed = network_machine.run()
    # Then the run fails, version 1 serves, and the current files and states are those of version 1
    assert failed["status"] == "FAILED", failed
    assert network_machine.dataset.lookup.read_active_version(consistent=True) == 1
    after = network_machine.list_files()
    assert {name: after[name] for name in before if "/" not in name} == {
        name: data for name, data in before.items() if "/" not in name
    }
    assert network_machine.dataset.list_states.get("network:aws") == state
    assert published_failures(capsys.readouterr().out)[-1] == (NETWORK, 1, "failed")
