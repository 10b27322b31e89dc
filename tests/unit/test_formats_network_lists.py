"""The public network lists, each read from a sample in its owner's format: IPv4, IPv6, documented fields."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Any

import pytest

from loader.errors import SourceError
from loader.formats import FormatOptions, Header, RowError, SourceRow, open_rows
from loader.formats.network_lists import NETWORK_COLUMNS, NETWORK_LISTS, list_of

SAMPLES = Path(__file__).parent.parent / "fixtures" / "network"
NETWORK = FormatOptions(format="network")


def read(path: Path, name: str | None = None) -> tuple[list[str], dict[str, dict[str, Any]], list[str]]:
    """Columns, the set values of each row by its network, and the errors."""
    entries = list(open_rows(path, name or path.name, NETWORK))
    header = entries[0]
    assert isinstance(header, Header)
    rows = {}
    for entry in entries:
        if isinstance(entry, SourceRow):
            network = next(ipaddress.summarize_address_range(*_bounds(entry)))
            rows[str(network)] = {key: value for key, value in entry.values.items() if value is not None}
    return header.columns, rows, [entry.message for entry in entries if isinstance(entry, RowError)]


def _bounds(row: SourceRow) -> tuple[ipaddress.IPv4Address, ipaddress.IPv4Address] | Any:
    return ipaddress.ip_address(row.start if row.family == 4 else row.start.to_bytes(16, "big")), (
        ipaddress.ip_address(row.end if row.family == 4 else row.end.to_bytes(16, "big"))
    )


CLOUD = ["cloud"]
#: file -> (an IPv4 network and its fields, an IPv6 network and its fields), as each owner documents them.
#: A network and the fields it answers, or None where the sample holds no such family.
Sample = tuple[str, dict[str, Any]] | None
EXPECTED: dict[str, tuple[Sample, Sample]] = {
    "aws.json": (
        (
            "3.5.140.0/22",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "aws",
                "cloud_region": "ap-northeast-2",
                "cloud_services": ["AMAZON", "S3"],
                "cloud_network_border_group": "ap-northeast-2",
            },
        ),
        (
            "2600:1f14::/35",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "aws",
                "cloud_region": "us-west-2",
                "cloud_services": ["AMAZON", "EC2"],
                "cloud_network_border_group": "us-west-2",
            },
        ),
    ),
    "gcp.json": (
        (
            "34.80.0.0/15",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "gcp",
                "cloud_region": "asia-east1",
                "cloud_services": ["Google Cloud"],
            },
        ),
        (
            "2600:1900:4010::/44",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "gcp",
                "cloud_region": "europe-west1",
                "cloud_services": ["Google Cloud"],
            },
        ),
    ),
    "azure.json": (
        (
            "13.69.0.0/17",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "azure",
                "cloud_region": "westeurope",
            },
        ),
        (
            "2a01:111:2050::/44",
            {"network_kinds": CLOUD, "cloud_provider": "azure", "cloud_services": ["AzureFrontDoor"]},
        ),
    ),
    "oracle.json": (
        (
            "134.70.24.0/21",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "oracle",
                "cloud_region": "us-phoenix-1",
                "cloud_services": ["OSN", "OBJECT_STORAGE"],
            },
        ),
        (
            "2603:c020:8000::/36",
            {
                "network_kinds": CLOUD,
                "cloud_provider": "oracle",
                "cloud_region": "eu-frankfurt-1",
                "cloud_services": ["OCI"],
            },
        ),
    ),
    "cloudflare-1.txt": (("104.16.0.0/13", {"network_kinds": CLOUD, "cloud_provider": "cloudflare"}), None),
    "cloudflare-2.txt": (None, ("2606:4700::/32", {"network_kinds": CLOUD, "cloud_provider": "cloudflare"})),
    "fastly.json": (
        ("151.101.0.0/16", {"network_kinds": CLOUD, "cloud_provider": "fastly"}),
        ("2a04:4e42::/32", {"network_kinds": CLOUD, "cloud_provider": "fastly"}),
    ),
    "github.json": (
        (
            "192.30.252.0/22",
            {"network_kinds": CLOUD, "cloud_provider": "github", "cloud_services": ["hooks", "web", "api"]},
        ),
        ("2a0a:a440::/29", {"network_kinds": CLOUD, "cloud_provider": "github", "cloud_services": ["web"]}),
    ),
    "googlebot.json": (
        ("66.249.64.0/27", {"network_kinds": ["crawler"], "crawler": "googlebot"}),
        ("2001:4860:4801:10::/64", {"network_kinds": ["crawler"], "crawler": "googlebot"}),
    ),
    "bingbot.json": (
        ("157.55.39.0/24", {"network_kinds": ["crawler"], "crawler": "bingbot"}),
        None,  # Bing publishes no IPv6 prefix (IPV4_ONLY)
    ),
    "tor.txt": (
        ("185.220.101.1/32", {"network_kinds": ["tor"], "tor_exit": True}),
        None,  # the bulk exit list holds no IPv6 address (IPV4_ONLY)
    ),
    "apple-relay.csv": (
        (
            "172.225.46.64/26",
            {
                "network_kinds": ["relay"],
                "relay": "icloud-private-relay",
                "relay_country": "US",
                "relay_region": "US-CA",
                "relay_city": "Los Angeles",
            },
        ),
        (
            "2a02:26f7:b3c0:4000::/64",
            {
                "network_kinds": ["relay"],
                "relay": "icloud-private-relay",
                "relay_country": "FR",
                "relay_region": "FR-IDF",
                "relay_city": "Paris",
            },
        ),
    ),
    "spamhaus-drop-1.txt": (
        ("1.10.16.0/20", {"network_kinds": ["drop"], "drop": True, "drop_sbl": "SBL256894"}),
        None,
    ),
    "spamhaus-drop-2.txt": (
        None,
        ("2a06:e480::/29", {"network_kinds": ["drop"], "drop": True, "drop_sbl": "SBL301771"}),
    ),
}


@pytest.mark.parametrize("file_name", sorted(EXPECTED))
def test_each_list_yields_its_documented_fields_for_ipv4_and_ipv6(file_name: str) -> None:
    # Given a sample in the owner's format, When read as --format network
    columns, rows, errors = read(SAMPLES / file_name)
    # Then every list has the same columns, no error, and the documented fields per family
    assert columns == list(NETWORK_COLUMNS)
    assert errors == []
    for expected in EXPECTED[file_name]:
        if expected is not None:
            network, fields = expected
            assert rows[network] == fields


#: Lists whose owners publish no IPv6 (counted on 2 July 2026 by a daily mirror of them:
#: Bingbot 28 IPv4 prefixes, Tor's bulk exit list 1,323 IPv4 addresses, none IPv6; docs/feeds.md).
#: Their samples hold none, rather than an invented one.
IPV4_ONLY = {"bingbot", "tor"}


def test_every_list_has_samples_of_both_families_unless_its_owner_publishes_ipv4_only() -> None:
    families: dict[str, set[int]] = {}
    for file_name, pair in EXPECTED.items():
        for family, expected in zip((4, 6), pair, strict=True):
            if expected is not None:
                families.setdefault(list_of(file_name), set()).add(family)
    assert families == {name: {4} if name in IPV4_ONLY else {4, 6} for name in NETWORK_LISTS}
    # And the samples of those lists really hold no IPv6, as their owners' files do not
    for name in IPV4_ONLY:
        (sample,) = [path for path in SAMPLES.iterdir() if path.name.startswith(f"{name}.")]
        assert all(":" not in network for network in read(sample)[1])


@pytest.mark.parametrize(
    ("name", "body", "network"),
    [
        ("bingbot.json", b'{"prefixes": [{"ipv6Prefix": "2001:db8:40::/48"}]}', "2001:db8:40::/48"),
        ("tor.txt", b"2001:db8::7\n", "2001:db8::7/128"),
    ],
)
def test_an_ipv4_only_list_still_reads_ipv6_should_its_owner_add_some(
    tmp_path: Path, name: str, body: bytes, network: str
) -> None:
    # Googlebot's shape has ipv6Prefix; a Tor exit may one day be listed by its IPv6 address
    _, rows, errors = read(copy_with(tmp_path, name, body))
    assert errors == []
    assert list(rows) == [network]


def copy_with(tmp_path: Path, name: str, body: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(body)
    return path


@pytest.mark.parametrize(
    ("name", "body", "reason"),
    [
        ("aws.json", b'{"prefixes": [{"ip_prefix": "3.5.140.0/22"', "not valid JSON"),
        ("aws.json", b"<!DOCTYPE html><html><body>Please log in to the Wi-Fi</body></html>", "an HTML page"),
        ("tor.txt", b"\n  <html><head><title>502 Bad Gateway</title></head></html>\n", "an HTML page"),
        ("aws.json", b'{"syncToken": "1", "prefixes": [], "ipv6_prefixes": []}', "empty release is refused"),
        ("tor.txt", b"", "empty release is refused"),
        ("fastly.json", b'{"addresses": ["23.235.32.0/20"]}', "'ipv6_addresses'"),
        ("nothing.json", b"{}", "not a known network list"),
    ],
)
def test_a_broken_list_is_refused_with_the_file_named(
    tmp_path: Path, name: str, body: bytes, reason: str
) -> None:
    with pytest.raises(SourceError, match=reason) as error:
        read(copy_with(tmp_path, name, body))
    assert name in str(error.value)


def test_a_prefix_with_host_bits_set_fails_its_own_row_by_position(tmp_path: Path) -> None:
    body = b'{"addresses": ["23.235.32.0/20", "151.101.1.0/16"], "ipv6_addresses": ["2a04:4e40::1/32"]}'
    _, rows, errors = read(copy_with(tmp_path, "fastly.json", body))
    assert list(rows) == ["23.235.32.0/20"]
    assert len(errors) == 2
    assert errors[0].startswith("fastly.json: addresses[1]: prefix '151.101.1.0/16'")
    assert "host bits set" in errors[0]
    assert errors[1].startswith("fastly.json: ipv6_addresses[0]:")


def test_a_relay_row_with_an_invalid_country_code_fails_by_line(tmp_path: Path) -> None:
    body = b"172.224.224.0/27,GB,GB-EN,London,\n172.225.46.64/26,USA,US-CA,Los Angeles,\n"
    _, rows, errors = read(copy_with(tmp_path, "apple-relay.csv", body))
    assert list(rows) == ["172.224.224.0/27"]
    assert errors == ["apple-relay.csv: line 2: country 'USA' is not an ISO 3166-1 alpha-2 code"]


def test_a_regional_azure_service_tag_yields_its_region_and_service_for_both_families() -> None:
    # Storage.WestUS: region "westus", systemService "AzureStorage", one IPv4 and one IPv6 prefix
    _, rows, errors = read(SAMPLES / "azure.json")
    expected = {
        "network_kinds": CLOUD,
        "cloud_provider": "azure",
        "cloud_region": "westus",
        "cloud_services": ["AzureStorage"],
    }
    assert errors == []
    assert rows["20.150.34.0/23"] == rows["2603:1030:a07:3::/64"] == expected


@pytest.mark.parametrize(
    ("name", "body", "line"),
    [
        # Tor's list ends every address with a newline: a last line without one was cut
        ("tor.txt", b"185.220.101.1\n185.220.101.33\n185.220.101.1", 3),
        # Spamhaus's too, its SBL id cut or not
        ("spamhaus-drop-1.txt", b"; DROP\n1.10.16.0/20 ; SBL256894\n1.19.0.0/16 ; SBL4", 3),
        # Cloudflare's last line has no newline (as published), but a cut one is no whole prefix
        ("cloudflare-1.txt", b"173.245.48.0/20\n103.21.244.0/22\n103.22.2", 3),
        ("cloudflare-2.txt", b"2400:cb00::/32\n2606:4700::/3", 2),
    ],
    ids=["tor-no-newline", "spamhaus-no-newline", "cloudflare-partial-v4", "cloudflare-partial-v6"],
)
def test_a_text_list_cut_inside_its_last_line_is_refused_as_cut(
    tmp_path: Path, name: str, body: bytes, line: int
) -> None:
    # Given a text list cut mid-line (a download that stopped without the server saying so)
    # When it is read, Then it is refused whole, naming the file, the line and a cut download
    with pytest.raises(SourceError, match=rf"{name}: line {line}: .*cut") as error:
        read(copy_with(tmp_path, name, body))
    assert "refused" in str(error.value)


def test_cloudflares_list_without_a_final_newline_is_read_whole(tmp_path: Path) -> None:
    # Given Cloudflare's lists as it publishes them: no newline after the last prefix
    v4 = copy_with(tmp_path, "cloudflare-1.txt", b"173.245.48.0/20\n103.21.244.0/22")
    v6 = copy_with(tmp_path, "cloudflare-2.txt", b"2400:cb00::/32\n2606:4700::/32")
    # Then every prefix is read, the last one included
    assert list(read(v4)[1]) == ["173.245.48.0/20", "103.21.244.0/22"]
    assert list(read(v6)[1]) == ["2400:cb00::/32", "2606:4700::/32"]


def test_a_list_entry_without_a_service_answers_no_cloud_services(tmp_path: Path) -> None:
    # An Azure regional tag has systemService "", an Oracle CIDR may have no tags: the field is
    # absent from the answer (docs/feeds.md: a field a list does not set is absent), not []
    azure = b'{"values": [{"name": "AzureCloud.westus", "properties": {"region": "westus", '
    azure += b'"systemService": "", "addressPrefixes": ["13.64.0.0/16"]}}]}'
    oracle = b'{"regions": [{"region": "us-phoenix-1", "cidrs": [{"cidr": "129.146.0.0/21", "tags": []}]}]}'
    for name, body in (("azure.json", azure), ("oracle.json", oracle)):
        _, rows, errors = read(copy_with(tmp_path, name, body))
        assert errors == []
        (fields,) = rows.values()
        assert "cloud_services" not in fields
        assert fields["cloud_region"] in {"westus", "us-phoenix-1"}
