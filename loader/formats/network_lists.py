"""Public network-kind lists (``--format network``), each read from its owner's published format.

A file's name says which list it is: ``<list>.<anything>`` (``aws.json``,
``tor.txt``, ``cloudflare-1.txt``: the part before the first dot or dash-digit).
Every list yields the same columns (``NETWORK_COLUMNS``), so lists load
together into one dataset; a column a list does not fill is absent from its
rows' answers (``NativeValues`` with None).

| list | owner format | fields |
|---|---|---|
| ``aws`` | ``ip-ranges.json``: ``prefixes`` / ``ipv6_prefixes`` | provider, region, services, border group |
| ``gcp`` | ``cloud.json``: ``prefixes``, ``ipv4Prefix``/``ipv6Prefix`` | provider, region (scope), service |
| ``azure`` | Service Tags JSON: ``values[].properties`` | provider, region, services (systemService) |
| ``oracle`` | ``public_ip_ranges.json``: ``regions[].cidrs`` | provider, region, services (tags) |
| ``cloudflare`` | ``ips-v4`` / ``ips-v6``: a prefix per line | provider |
| ``fastly`` | ``public-ip-list``: ``addresses`` / ``ipv6_addresses`` | provider |
| ``github`` | ``meta``: each list of prefixes by service | provider, services |
| ``googlebot``, ``bingbot`` | ``prefixes`` of ``ipv4Prefix``/``ipv6Prefix`` | crawler |
| ``tor`` | the bulk exit list: an address per line | ``tor_exit`` |
| ``apple-relay`` | an RFC 8805 geofeed (``loader.formats.geofeed``) | relay, its country, region, city |
| ``spamhaus-drop`` | ``drop.txt`` / ``dropv6.txt``: ``prefix ; SBLnnn`` | ``drop``, its SBL id |

Every row also carries ``network_kinds``, a list (``cloud``, ``tor``,
``relay``, ``crawler``, ``drop``): merged across lists by ``--overlaps merge``,
it names every kind an address has. ``cloud_services`` is a list too: one
prefix is published under several services (AWS's ``AMAZON`` and ``EC2``).

Refusals, each with the file and where in it: a file over ``MAX_LIST_BYTES``,
an HTML page (a captive portal, an error page), JSON that does not parse or
lacks the owner's keys, a list with no ranges at all (an empty or cut
release must never replace a good one), and a text list cut inside its last
line: Tor's and Spamhaus's end every line with a newline, so a last line
without one is cut; Cloudflare's lists end without one (as published), so
there a last line that is no whole prefix is cut. A bad prefix (host bits set, not an
address) fails its own row, which the load's ``--max-errors`` decides.
Same prefixes within one list become one row; their services are joined.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final

from ipmeta.schema.ips import Family
from loader.errors import SourceError
from loader.formats.column_types import NativeValues
from loader.formats.geofeed import geofeed_entries
from loader.formats.rows import FormatOptions, Header, RowError, SourceRow
from loader.formats.text import open_binary

#: The largest list read (Azure's Service Tags, the largest, is about 5 MB): read whole, so capped.
MAX_LIST_BYTES: Final = 64 << 20
NETWORK_COLUMNS: Final = (
    "network_kinds",
    "cloud_provider",
    "cloud_region",
    "cloud_services",
    "cloud_network_border_group",
    "tor_exit",
    "relay",
    "relay_country",
    "relay_region",
    "relay_city",
    "crawler",
    "drop",
    "drop_sbl",
)

#: ``(prefix text, where, fields)`` of one published entry.
Entry = tuple[str, str, dict[str, Any]]
Parser = Callable[[bytes, str], Iterator[Entry | RowError]]


def open_network_rows(
    path: Path, name: str, options: FormatOptions
) -> Iterator[Header | SourceRow | RowError]:
    listed = list_of(name)
    with open_binary(path) as handle:
        body = handle.read(MAX_LIST_BYTES + 1)
    if len(body) > MAX_LIST_BYTES:
        raise SourceError(f"{name}: larger than {MAX_LIST_BYTES >> 20} MB; refused")
    if body.lstrip()[:1] == b"<":
        raise SourceError(
            f"{name}: line 1: an HTML page, not the {listed} list (a captive portal or an error page?)"
        )
    parser, constants = NETWORK_LISTS[listed]
    yield Header(list(NETWORK_COLUMNS))
    rows = errors = 0
    for item in _joined(parser(body, name)):
        errors += isinstance(item, RowError)
        if isinstance(item, SourceRow):
            rows += 1
            values = NativeValues(dict.fromkeys(NETWORK_COLUMNS))
            values.update(constants)
            values.update(item.values)
            yield SourceRow(item.origin, item.family, item.start, item.end, values)
        else:
            yield item
    if rows == 0 and errors == 0:
        raise SourceError(f"{name}: no ranges in the {listed} list: an empty release is refused")


def list_of(name: str) -> str:
    """The list a file holds, by its name: ``aws.json`` -> ``aws``, ``cloudflare-2.txt`` -> ``cloudflare``."""
    stem = Path(name).name.split(".", 1)[0]
    listed = re.sub(r"-\d+$", "", stem)
    if listed not in NETWORK_LISTS:
        raise SourceError(
            f"{name}: not a known network list; name the file <list>.<ext>, <list> one of "
            f"{', '.join(sorted(NETWORK_LISTS))}"
        )
    return listed


def _joined(entries: Iterator[Entry | RowError]) -> Iterator[SourceRow | RowError]:
    """Entries of one prefix become one row (lists joined, first scalar kept), in first-seen order."""
    rows: dict[str, SourceRow] = {}
    for entry in entries:
        if isinstance(entry, RowError):
            yield entry
            continue
        text, where, fields = entry
        try:
            network = ipaddress.ip_network(text.strip(), strict=True)
        except ValueError as error:
            yield RowError(f"{where}: prefix {text!r} is not an address or a CIDR prefix: {error}")
            continue
        key = str(network)
        row = rows.get(key)
        if row is None:
            family: Family = 4 if network.version == 4 else 6
            first, last = int(network.network_address), int(network.broadcast_address)
            rows[key] = SourceRow(where, family, first, last, dict(fields))
        else:
            merge_values(row.values, fields)
    yield from rows.values()


def merge_values(into: dict[str, Any], other: Mapping[str, Any]) -> None:
    """``other``'s fields over ``into``'s: lists joined without repeats, a set scalar kept over None."""
    for column, value in other.items():
        held = into.get(column)
        if isinstance(held, list) and isinstance(value, list):
            into[column] = held + [item for item in value if item not in held]
        elif value is not None and held is None:
            into[column] = value


def _json(body: bytes, name: str) -> Any:
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SourceError(f"{name}: not valid JSON ({error}); a cut or garbled download?") from None


def _members(data: Any, key: str, name: str, kind: type = list) -> Any:
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise SourceError(f"{name}: no {key!r} {kind.__name__} where the owner's format has one")
    return value


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _object(value: Any) -> dict[str, Any]:
    """A JSON object, or an empty one: its prefix is then missing, which fails its own row."""
    return value if isinstance(value, dict) else {}


def _services(value: Any) -> list[str] | None:
    """A service as a one-item list; none (absent from the answer, not ``[]``) where it is empty."""
    return [value] if _text(value) else None


def _aws(body: bytes, name: str) -> Iterator[Entry]:
    data = _json(body, name)
    for key, prefix_key in (("prefixes", "ip_prefix"), ("ipv6_prefixes", "ipv6_prefix")):
        for index, member in enumerate(_members(data, key, name)):
            item = _object(member)
            fields = {
                "cloud_region": _text(item.get("region")),
                "cloud_services": _services(item.get("service")),
                "cloud_network_border_group": _text(item.get("network_border_group")),
            }
            yield str(item.get(prefix_key, "")), f"{name}: {key}[{index}]", fields


def _google_prefixes(body: bytes, name: str) -> Iterator[Entry]:
    """Google's ``cloud.json``, ``googlebot.json`` and Bing's ``bingbot.json`` share one shape."""
    for index, member in enumerate(_members(_json(body, name), "prefixes", name)):
        item = _object(member)
        prefix = item.get("ipv4Prefix") or item.get("ipv6Prefix") or ""
        fields: dict[str, Any] = {}
        if "scope" in item or "service" in item:
            fields["cloud_region"] = _text(item.get("scope"))
            fields["cloud_services"] = _services(item.get("service"))
        yield str(prefix), f"{name}: prefixes[{index}]", fields


def _azure(body: bytes, name: str) -> Iterator[Entry | RowError]:
    for index, member in enumerate(_members(_json(body, name), "values", name)):
        tag = _object(member)
        properties = _object(tag.get("properties"))
        fields = {
            "cloud_region": _text(properties.get("region")),
            "cloud_services": _services(properties.get("systemService")),
        }
        where = f"{name}: values[{index}] ({tag.get('name', '?')})"
        prefixes = properties.get("addressPrefixes")
        if not isinstance(prefixes, list):
            yield RowError(f"{where}: no addressPrefixes list")
            continue
        for prefix in prefixes:
            yield str(prefix), where, fields


def _oracle(body: bytes, name: str) -> Iterator[Entry]:
    for index, member in enumerate(_members(_json(body, name), "regions", name)):
        region = _object(member)
        cidrs = region.get("cidrs")
        for position, entry in enumerate(cidrs if isinstance(cidrs, list) else []):
            cidr = _object(entry)
            tags = cidr.get("tags")
            services = [tag for tag in tags if _text(tag)] if isinstance(tags, list) else []
            fields = {"cloud_region": _text(region.get("region")), "cloud_services": services or None}
            yield str(cidr.get("cidr", "")), f"{name}: regions[{index}].cidrs[{position}]", fields


def _fastly(body: bytes, name: str) -> Iterator[Entry]:
    data = _json(body, name)
    for key in ("addresses", "ipv6_addresses"):
        for index, prefix in enumerate(_members(data, key, name)):
            yield str(prefix), f"{name}: {key}[{index}]", {}


#: GitHub's ``meta`` keys that are lists but not of prefixes.
_GITHUB_NOT_PREFIXES: Final = frozenset({"ssh_keys"})


def _github(body: bytes, name: str) -> Iterator[Entry]:
    data = _json(body, name)
    if not isinstance(data, dict):
        raise SourceError(f"{name}: not a JSON object, as GitHub's meta is")
    for service, prefixes in data.items():
        if isinstance(prefixes, list) and service not in _GITHUB_NOT_PREFIXES:
            for index, prefix in enumerate(prefixes):
                yield str(prefix), f"{name}: {service}[{index}]", {"cloud_services": [service]}


def _lines(body: bytes, name: str, *, newline_ended: bool = False) -> Iterator[tuple[int, str]]:
    """The lines of a text list, numbered from 1.

    ``newline_ended``: the owner ends every line with a newline (Tor's and Spamhaus's lists),
    so a last line without one is a download cut inside it, refused whole.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise SourceError(f"{name}: not UTF-8 text") from None
    lines = text.splitlines()
    if newline_ended and lines and not text.endswith(("\n", "\r")):
        raise _cut(name, len(lines), lines[-1], "has no newline, and every line of this list ends with one")
    yield from enumerate(lines, start=1)


def _cut(name: str, number: int, line: str, why: str) -> SourceError:
    return SourceError(f"{name}: line {number}: the last line {line[:60]!r} {why}: a cut download; refused")


def _prefix_per_line(body: bytes, name: str) -> Iterator[Entry]:
    """Cloudflare's ``ips-v4``/``ips-v6``: one prefix a line, the last without a newline (as published).

    The last line is then the one place a cut shows: one that is no whole prefix is refused as cut.
    """
    unended = 0 if body.endswith((b"\n", b"\r")) else len(body.splitlines())
    for number, line in _lines(body, name):
        text = line.strip()
        if text and not text.startswith("#"):
            if number == unended and not _whole_prefix(text):
                raise _cut(name, number, line, "is no whole prefix and has no newline")
            yield text, f"{name}: line {number}", {}


def _whole_prefix(text: str) -> bool:
    try:
        ipaddress.ip_network(text, strict=True)
    except ValueError:
        return False
    return True


def _exit_per_line(body: bytes, name: str) -> Iterator[Entry]:
    """Tor's bulk exit list: one address a line, every line ended by a newline."""
    for number, line in _lines(body, name, newline_ended=True):
        text = line.strip()
        if text and not text.startswith("#"):
            yield text, f"{name}: line {number}", {}


def _spamhaus(body: bytes, name: str) -> Iterator[Entry]:
    """``prefix ; SBLnnn``, with ``;`` comment lines above, every line ended by a newline."""
    for number, line in _lines(body, name, newline_ended=True):
        prefix, _, comment = line.partition(";")
        if prefix.strip():
            sbl = comment.strip() or None
            yield prefix.strip(), f"{name}: line {number}", {"drop_sbl": sbl}


def _apple_relay(body: bytes, name: str) -> Iterator[Entry | RowError]:
    for entry in geofeed_entries((line for _, line in _lines(body, name)), name):
        if isinstance(entry, RowError):
            yield entry
            continue
        where, network, values = entry
        fields = {
            "relay_country": values["country"],
            "relay_region": values["region"],
            "relay_city": values["city"],
        }
        yield str(network), where, fields


def _cloud(provider: str) -> dict[str, Any]:
    return {"network_kinds": ["cloud"], "cloud_provider": provider}


#: Each list: its owner format's parser, and the fields every row of it carries.
NETWORK_LISTS: Final[Mapping[str, tuple[Parser, Mapping[str, Any]]]] = {
    "aws": (_aws, _cloud("aws")),
    "gcp": (_google_prefixes, _cloud("gcp")),
    "azure": (_azure, _cloud("azure")),
    "oracle": (_oracle, _cloud("oracle")),
    "cloudflare": (_prefix_per_line, _cloud("cloudflare")),
    "fastly": (_fastly, _cloud("fastly")),
    "github": (_github, _cloud("github")),
    "googlebot": (_google_prefixes, {"network_kinds": ["crawler"], "crawler": "googlebot"}),
    "bingbot": (_google_prefixes, {"network_kinds": ["crawler"], "crawler": "bingbot"}),
    "tor": (_exit_per_line, {"network_kinds": ["tor"], "tor_exit": True}),
    "apple-relay": (_apple_relay, {"network_kinds": ["relay"], "relay": "icloud-private-relay"}),
    "spamhaus-drop": (_spamhaus, {"network_kinds": ["drop"], "drop": True}),
}
