"""The real local server over TLS, in front of a table, as MaxMind's and ipinfo's clients reach it.

``geoip2.webservice.Client`` speaks only https: the server presents a throwaway certificate
(``testing.tls``) whose authority the clients trust through ``REQUESTS_CA_BUNDLE``, as a team
would trust its own. The ipinfo handlers take their API URLs from module constants
(``ipinfo.handler.API_URL``, ``handler_lite.LITE_API_URL``, ``handler_core.CORE_API_URL``,
``handler_plus.PLUS_API_URL``); ``ipinfo_clients`` points all four at the server.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ipinfo
import ipinfo.handler
import ipinfo.handler_core
import ipinfo.handler_lite
import ipinfo.handler_plus
import pytest

from ipmeta.api import dependencies
from ipmeta.lookup.range_cache import RangeCache
from ipmeta.schema.settings import Front
from ipmeta_cli.server import LocalApiServer, tls_context
from loader.store.table import LoaderTable
from testing.tls import ServerCertificate, make_server_certificate


@dataclass(frozen=True)
class ClientServer:
    server: LocalApiServer
    certificate: ServerCertificate

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"


@contextmanager
def serving_clients(
    table: LoaderTable,
    folder: Path,
    api_key: str,
    *,
    pointer_cache_seconds: float = 0.0,
    ranges: RangeCache | None = None,
    front: Front = Front.REST,
) -> Iterator[ClientServer]:
    """The real handler behind the real local server, over TLS, admitting ``api_key`` only where
    ``front`` does (the server before the function, or the function itself behind ``url``); by
    default every request re-reads the pointers and queries every dataset (no range cache)."""
    certificate = make_server_certificate(folder)
    with pytest.MonkeyPatch.context() as patch:
        # The clients trust the team's own authority, as a deployment's users would.
        patch.setenv("REQUESTS_CA_BUNDLE", str(certificate.authority))
        dependencies.install(
            dependencies.Dependencies(
                store=table.lookup,
                pointer_cache_seconds=pointer_cache_seconds,
                ranges=RangeCache(0) if ranges is None else ranges,
            )
        )
        from ipmeta.api.handler import handler

        tls = tls_context(str(certificate.certificate), str(certificate.key))
        server = LocalApiServer("127.0.0.1", 0, handler, api_keys=[api_key], tls=tls, front=front)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            yield ClientServer(server, certificate)
        finally:
            server.shutdown()
            server.server_close()
            dependencies.install(None)


@dataclass(frozen=True)
class IpinfoClients:
    """ipinfo 5.6.0's handlers: the classic API, Lite, Core and Plus."""

    classic: Any
    lite: Any
    core: Any
    plus: Any


def ipinfo_clients(base_url: str, token: str, patch: pytest.MonkeyPatch) -> IpinfoClients:
    """Each handler with its API URL under ``base_url`` (``https://host/ipinfo``, or the root), as a
    team points them at ipmeta; ``patch`` restores the URLs. No client cache: every call asks."""
    patch.setattr(ipinfo.handler, "API_URL", base_url)
    patch.setattr(ipinfo.handler_lite, "LITE_API_URL", f"{base_url}/lite")
    patch.setattr(ipinfo.handler_core, "CORE_API_URL", f"{base_url}/lookup")
    patch.setattr(ipinfo.handler_plus, "PLUS_API_URL", f"{base_url}/lookup")
    uncached: dict[str, Any] = {"cache_options": {"maxsize": 1, "ttl": 0}}
    return IpinfoClients(
        classic=ipinfo.getHandler(token, **uncached),
        lite=ipinfo.getHandlerLite(token, **uncached),
        core=ipinfo.getHandlerCore(token, **uncached),
        plus=ipinfo.getHandlerPlus(token, **uncached),
    )
