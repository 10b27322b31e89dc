"""What the loader says of each file of ``tests/fixtures/bad``: the reason a load of it is refused."""

from __future__ import annotations

EXPECTED_REASONS: dict[str, str] = {
    "01-bad-ipv4.csv": "line 3: '999.1.1.1' is not a valid IP address",
    "02-bad-ipv6.csv": "line 3: '2001:::1' is not a valid IP address",
    "03-start-after-end.csv": "line 3: start 1.0.1.9 is after end 1.0.1.0",
    "04-mixed-families.csv": "line 3: start is IPv4 but end is IPv6",
    "05-too-few-columns.csv": "line 3: expected 4 columns, found 3",
    "06-too-many-columns.csv": "line 3: expected 4 columns, found 5",
    "07-integer-too-large-for-ipv4.csv": "line 3: '4294967296' is too large for an IPv4 address",
    "08-negative-integer.csv": "line 3: '-5' is not a valid IP address",
    "09-empty-start.csv": "line 3: an address field is empty",
    "10-empty-end.csv": "line 3: an address field is empty",
    "11-zone-id.csv": "line 3: 'fe80::1%eth0' has a zone id",
    "12-leading-zero-octet.csv": "line 3: '01.0.1.0' is not a valid IP address",
    "13-item-over-400kb.csv": "line 3: the item would take",
    "14-missing-end-column.csv": "line 1: no start and end columns, nor a network column",
    "15-duplicate-column.csv": "line 1: duplicate column names ['asn']",
    "16-empty-file.csv": "line 1: the file is empty",
    "17-header-only.csv": "line 1: no ranges to load",
    "18-invalid-utf8.csv": "line 3: not valid UTF-8 text",
    "19-network-host-bits-set.csv": "line 3: '1.0.1.7/24' is not a valid network",
    "20-network-bad-prefix.csv": "line 3: '1.0.1.0/33' is not a valid network",
    "21-text-in-address.csv": "line 3: 'localhost' is not a valid IP address",
    "22-float-address.csv": "line 3: '16777472.5' is not a valid IP address",
    "23-truncated-gzip.csv.gz": "cannot read: Compressed file ended",
    "24-ipv6-integer-too-large.csv": "is too large for an IPv6 address",
    "25-cidr-in-start-column.csv": "line 3: '1.0.1.0/24' is not a valid IP address",
}
