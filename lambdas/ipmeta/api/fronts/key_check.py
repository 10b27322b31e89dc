"""The url front's key check: the function refuses a request without a known key, before any read.

Behind a function URL no API Gateway checks keys, so the function does, exactly as the HTTP
front's authorizer does: the key in its route family's forms (``credentials.request_key``, the
one reader of key forms; the family by the route the path would match), compared in constant
time with every key of the same secret of client name -> key (``credentials.client_of``). The
secret is read once per container and again every ``apiKeyCacheSeconds`` (powertools'
``parameters``, imported on the first keyed request: a cold start loads no boto3). A refused
request is 401 ``AUTHORIZATION_INVALID`` in its API family's own error shape
(``ipmeta.api.app.error_response``).

Behind the REST and HTTP fronts the environment names no secret and nothing is checked here:
their authorizers did it. Locally ``ipmeta serve --front url --api-key`` installs its keys
(``install``), so the handler refuses what the deployed function refuses.

Behind CloudFront (``edge``) two things differ, each set by the stack in the environment:
the client's ``Authorization`` arrives in another header (``EDGE_AUTHORIZATION_HEADER``, copied
there by a CloudFront Function, as the origin access control signs the origin request in
``Authorization``), and the batch alias's URL (reached without the origin access control, whose
signed POSTs need a body hash no client sends) serves the batch routes only.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ipmeta.api.fronts.credentials import needs_key
from ipmeta.schema.errors import AuthorizationInvalid, IpmetaError, RouteNotServed
from ipmeta.schema.settings import (
    DEFAULT_API_KEY_CACHE_SECONDS,
    ENV_API_KEY_CACHE_SECONDS,
    ENV_API_KEYS_SECRET_ARN,
    ENV_BATCH_ALIAS,
    ENV_EDGE_AUTHORIZATION_HEADER,
)

if TYPE_CHECKING:
    from typing import Protocol

    from ipmeta.api.fronts.front_events import FrontEvent

    class KeyRing(Protocol):
        def keys(self) -> Mapping[str, Any]:
            """Client name -> key."""
            ...


#: What the batch alias's URL serves: the batch routes (``/batch``: ipinfo's, at the root).
BATCH_PATHS: Final = frozenset({"/v1/batch", "/ipinfo/batch", "/batch"})
#: How a SigV4 ``Authorization`` begins: the origin access control's signature, never a client's key.
SIGV4_SCHEME: Final = "AWS4-"
#: The header the key forms are read from, as ``credentials`` names it (not imported here: the
#: REST and HTTP fronts' containers never read a key, and their cold start does not load it).
AUTHORIZATION_HEADER: Final = "authorization"

# Plain classes, not dataclasses: every container imports this module at its cold start.


class SecretKeys:
    """The deployed keys: a Secrets Manager secret, cached for ``max_age_seconds`` per container."""

    __slots__ = ("max_age_seconds", "secret_arn")

    def __init__(self, secret_arn: str, max_age_seconds: int = DEFAULT_API_KEY_CACHE_SECONDS) -> None:
        self.secret_arn = secret_arn
        self.max_age_seconds = max_age_seconds

    def keys(self) -> Mapping[str, Any]:
        # Imported on the first keyed request, not at cold start: parameters brings boto3.
        from aws_lambda_powertools.utilities import parameters

        keys: Mapping[str, Any] = parameters.get_secret(
            self.secret_arn, transform="json", max_age=self.max_age_seconds
        )
        return keys


class StaticKeys:
    """Keys given at start (``ipmeta serve --front url --api-key``, tests)."""

    __slots__ = ("by_client",)

    def __init__(self, by_client: Mapping[str, str]) -> None:
        self.by_client = by_client

    def keys(self) -> Mapping[str, Any]:
        return self.by_client


class KeyCheck:
    """Whether and how this container checks keys (``from_environment``; ``install`` replaces it)."""

    __slots__ = ("batch_alias", "edge_authorization_header", "ring")

    def __init__(
        self,
        ring: KeyRing | None = None,
        edge_authorization_header: str | None = None,
        batch_alias: str | None = None,
    ) -> None:
        self.ring = ring
        #: The header the client's Authorization arrives in behind CloudFront, or None.
        self.edge_authorization_header = edge_authorization_header
        #: The alias whose URL serves the batch routes only, or None.
        self.batch_alias = batch_alias

    @classmethod
    def from_environment(cls) -> KeyCheck:
        secret = os.environ.get(ENV_API_KEYS_SECRET_ARN)
        seconds = int(os.environ.get(ENV_API_KEY_CACHE_SECONDS, DEFAULT_API_KEY_CACHE_SECONDS))
        return cls(
            SecretKeys(secret, seconds) if secret else None,
            (os.environ.get(ENV_EDGE_AUTHORIZATION_HEADER) or "").lower() or None,
            os.environ.get(ENV_BATCH_ALIAS) or None,
        )

    def refusal(self, event: FrontEvent, invoked_arn: str = "") -> IpmetaError | None:
        """Why the request is refused before its route runs, or None to let it through.

        ``invoked_arn`` is the Lambda context's: ``...:batch`` when the batch alias's URL was called.
        A preflight (``OPTIONS``) carries no key, as a browser sends none on one, and the
        lookup page's files need none, as on the API Gateway fronts."""
        if self._via_batch_alias(invoked_arn) and (
            event.http_method not in ("POST", "OPTIONS") or event.path not in BATCH_PATHS
        ):
            return RouteNotServed(f"this URL serves POST {', '.join(sorted(BATCH_PATHS))} only")
        if self.ring is None or not needs_key(event.http_method, event.path):
            return None
        from ipmeta.api.fronts.credentials import REFUSAL_MESSAGE, client_of, request_key, route_of_path

        headers, query, multi_headers, multi_query = event.key_inputs
        key = request_key(
            route_of_path(event.path), self._headers(headers), query, multi_headers, multi_query
        )
        if client_of(key, self.ring.keys()) is None:
            return AuthorizationInvalid(REFUSAL_MESSAGE)
        return None

    def _via_batch_alias(self, invoked_arn: str) -> bool:
        return bool(self.batch_alias) and invoked_arn.rsplit(":", 1)[-1] == self.batch_alias

    def _headers(self, headers: Any) -> Any:
        """The request's headers, with the client's Authorization where CloudFront's signature was.

        An ``Authorization`` that is a SigV4 signature is CloudFront's, never a client's key; the
        batch alias's URL, reached without the origin access control, gets the client's own."""
        moved = self.edge_authorization_header
        if not moved or not isinstance(headers, Mapping):
            return headers
        kept = {
            name: value
            for name, value in headers.items()
            if name.lower() != moved
            and not (name.lower() == AUTHORIZATION_HEADER and str(value).startswith(SIGV4_SCHEME))
        }
        copied = [value for name, value in headers.items() if name.lower() == moved]
        if copied:
            kept = {name: value for name, value in kept.items() if name.lower() != AUTHORIZATION_HEADER}
            kept[AUTHORIZATION_HEADER] = copied[0]
        return kept


_current: KeyCheck | None = None


def current() -> KeyCheck:
    """This container's key check, read from the environment on first use."""
    global _current  # noqa: PLW0603 - one per container, as the keys' cache is
    if _current is None:
        _current = KeyCheck.from_environment()
    return _current


def install(check: KeyCheck | None) -> None:
    """Replace the key check (the local server's url front, tests); None reads the environment again."""
    global _current  # noqa: PLW0603
    _current = check
