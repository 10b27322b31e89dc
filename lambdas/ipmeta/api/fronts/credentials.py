"""The caller's API key, in any of the forms the clients ipmeta stands in for send it.

- ``x-api-key: KEY``: ipmeta's own clients and API Gateway's usage plans;
- ``Authorization: Basic base64(account:KEY)``: MaxMind's GeoIP2 clients send the
  account id and licence key; the password is the ipmeta key, the account is ignored;
- ``Authorization: Bearer KEY``: the ipinfo clients;
- ``?token=KEY``: ipinfo's query form (``curl host/8.8.8.8?token=KEY``).

Each route family reads its own clients' forms and nothing else (``RouteFamily``,
``request_key``): ``/v1`` the ``x-api-key`` header, ``/geoip`` Basic's password,
``/ipinfo`` (and the root, with ``ipinfoAtRoot``) Bearer or ``?token=``. API Gateway
caches an authorizer's answer by the family's identity header, so the answer must
depend on that header alone: a key in another form is not read, and a header sent
twice is refused (docs/decisions.md, "The cache identity is the key checked"). The REST
front's authorizers have no identity source and cache nothing, so they judge every request,
one without a key included, and its 401 names the family's forms.
Both fronts' authorizers call ``request_key``, and so does the local server
(``ipmeta serve --api-key``), with the route its path would match in AWS, so a key
is taken locally exactly where a deployment takes it. Pure: no AWS here.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

API_KEY_HEADER = "x-api-key"
AUTHORIZATION_HEADER = "authorization"
TOKEN_PARAMETER = "token"


#: The lookup page (``/``) and its files (``/static/...``): they hold no data, so no front asks
#: them for a key (``ipmeta.api.routes.page_routes`` serves them).
PAGE_PATH: Final = "/"
STATIC_PREFIX: Final = "/static"


def is_page_path(path: str) -> bool:
    """The page's own paths: ``/`` and ``/static/...``; they need no key, and ipinfo at the root
    (``ipinfoAtRoot``) does not own them."""
    return path in (PAGE_PATH, STATIC_PREFIX) or path.startswith(STATIC_PREFIX + "/")


def needs_key(method: str, path: str) -> bool:
    """Whether a request must carry a key, on every front and the local server: all but a
    preflight (``OPTIONS``: browsers send no key on one, and API Gateway answers it without
    one) and the lookup page's ``GET``/``HEAD`` (it holds no data; its lookups carry the key)."""
    if method == "OPTIONS":
        return False
    return not (method in ("GET", "HEAD") and is_page_path(path))


class KeyForm(StrEnum):
    """Where a request carries its key."""

    API_KEY = "x-api-key"  # the header's whole value
    BASIC = "basic"  # Authorization: Basic base64(account:KEY), the password
    BEARER = "bearer"  # Authorization: Bearer KEY
    TOKEN = "token"  # ?token=KEY


def _authorization_key(value: str) -> tuple[KeyForm, str] | None:
    """The form and key of an ``Authorization`` value: Basic's password, or Bearer's token."""
    scheme, _, credentials = value.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        return (KeyForm.BEARER, credentials) if credentials else None
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, password = decoded.partition(":")
    return (KeyForm.BASIC, password) if colon and password else None


# -- one family of routes, one authorizer, the forms its clients send ------------------------

#: The header each header form is read from; ``?token=`` is a query parameter.
FORM_HEADERS: Final = {
    KeyForm.API_KEY: API_KEY_HEADER,
    KeyForm.BASIC: AUTHORIZATION_HEADER,
    KeyForm.BEARER: AUTHORIZATION_HEADER,
}
#: API Gateway's longest API key value; the HTTP API's keys keep to it too.
MAX_KEY_CHARS: Final = 128
#: A credential value longer than this is refused before it is decoded (a Basic value of
#: a 128-character key and a long account id is about 250).
MAX_CREDENTIAL_CHARS: Final = 1024
#: RFC 6750's b64token: letters, digits, ``-._~+/`` and trailing ``=``. API Gateway's keys
#: (alphanumeric), MaxMind's licence keys and ipinfo's tokens all fit; NUL, spaces, commas
#: (how a repeated header is joined) and non-ASCII never do.
_KEY_SHAPE: Final = re.compile(r"[A-Za-z0-9._~+/-]+=*")


@dataclass(frozen=True)
class RouteFamily:
    """The routes under one path segment, served by one authorizer, and the key forms they read."""

    path: str
    forms: tuple[KeyForm, ...]

    @property
    def identity_header(self) -> str | None:
        """The header API Gateway caches this family's answers by: the one header all its forms
        are read from. None when a form is a query parameter: no single identity, no cache."""
        headers = {FORM_HEADERS.get(form) for form in self.forms}
        return headers.pop() if len(headers) == 1 else None

    @property
    def refusal_message(self) -> str:
        """A 401's message for this family: the forms its clients send, and no other."""
        return refusal_message(self.forms)


V1_KEYS: Final = RouteFamily("v1", (KeyForm.API_KEY,))
#: MaxMind's clients send Basic auth, the licence key as the password.
GEOIP2_KEYS: Final = RouteFamily("geoip", (KeyForm.BASIC,))
#: ipinfo's clients send Bearer, or ``?token=`` (curl); its routes at the root are this family.
IPINFO_KEYS: Final = RouteFamily("ipinfo", (KeyForm.BEARER, KeyForm.TOKEN))
ROUTE_FAMILIES: Final = (V1_KEYS, GEOIP2_KEYS, IPINFO_KEYS)


def family_of_route(route: str) -> RouteFamily | None:
    """The family of a route API Gateway matched: a REST resource (``/geoip/{proxy+}``) or an HTTP
    API route key (``GET /geoip/{proxy+}``). The root and ``/{proxy+}`` are ipinfo's (``ipinfoAtRoot``)."""
    first = route.rpartition(" ")[2].strip("/").partition("/")[0]
    if first in ("", "{proxy+}"):
        return IPINFO_KEYS
    return next((family for family in ROUTE_FAMILIES if family.path == first), None)


def route_of_path(path: str) -> str:
    """The route a deployment's API Gateway would match for ``path``: its family's proxy
    (``/geoip/{proxy+}``), or the root's (ipinfo's, with ``ipinfoAtRoot``). Where nothing names
    the route (a function URL, the local server), a key is read by the route its path would match."""
    first = path.lstrip("/").split("/", 1)[0]
    if any(family.path == first for family in ROUTE_FAMILIES):
        return f"/{first}/{{proxy+}}"
    return "/{proxy+}"


def request_values(single: Any, multi: Any = None, *, fold_case: bool = False) -> dict[str, tuple[str, ...]]:
    """Each name's distinct values, from an event's single- and multi-value maps (REST sends both;
    an HTTP API joins a repeated header's values with commas). Header names fold to lower case."""
    pairs = [*(single.items() if isinstance(single, Mapping) else ())]
    for name, many in multi.items() if isinstance(multi, Mapping) else ():
        pairs.extend((name, value) for value in many if isinstance(many, list))
    found: dict[str, list[str]] = {}
    for name, value in pairs:
        if isinstance(name, str) and isinstance(value, str):
            seen = found.setdefault(name.lower() if fold_case else name, [])
            if value not in seen:
                seen.append(value)
    return {name: tuple(values) for name, values in found.items()}


def _key_in(form: KeyForm, value: str) -> str | None:
    if form in (KeyForm.API_KEY, KeyForm.TOKEN):
        return value
    found = _authorization_key(value)
    return found[1] if found and found[0] is form else None


def family_key(
    family: RouteFamily, headers: Mapping[str, tuple[str, ...]], query: Mapping[str, tuple[str, ...]]
) -> str | None:
    """The key a request of ``family`` carries in the family's forms, or None: refused.

    Only the family's forms are read, so the answer depends on nothing but what API Gateway
    caches it by. A header or parameter sent twice with different values is refused (which one
    would the cache have been keyed by?), and so are two forms holding different keys, and a
    key of any other shape than ``_KEY_SHAPE`` up to ``MAX_KEY_CHARS``.
    """
    keys: set[str] = set()
    for form in family.forms:
        header = FORM_HEADERS.get(form)
        values = query.get(TOKEN_PARAMETER, ()) if header is None else headers.get(header, ())
        if len(values) > 1 or any(len(value) > MAX_CREDENTIAL_CHARS for value in values):
            return None
        if values and (key := _key_in(form, values[0])) is not None:
            keys.add(key)
    key = keys.pop() if len(keys) == 1 else ""
    return key if len(key) <= MAX_KEY_CHARS and _KEY_SHAPE.fullmatch(key) else None


def request_key(
    route: Any, headers: Any, query: Any, multi_headers: Any = None, multi_query: Any = None
) -> str | None:
    """The key of an authorizer's request, read in its route family's forms only (``family_key``);
    None for a route of no family. Both fronts' authorizers answer with this."""
    family = family_of_route(route) if isinstance(route, str) else None
    if family is None:
        return None
    return family_key(
        family,
        request_values(headers, multi_headers, fold_case=True),
        request_values(query, multi_query),
    )


def client_of(presented: str | None, keys: Mapping[str, Any]) -> str | None:
    """The client whose key was presented, or None.

    Every key is compared, each in constant time, so the answer's timing says
    nothing about how close a guess came or which client it matched.
    """
    if not presented:
        return None
    offered = presented.encode()
    found = None
    for name, key in keys.items():
        if isinstance(key, str) and key and hmac.compare_digest(offered, key.encode()):
            found = name
    return found


#: What a front answers a request whose key is missing or unknown: 401 and one body that every
#: client reads as its own error (MaxMind's clients read ``code`` and ``error``, ``/v1``'s
#: clients ``code`` and ``message``, ipinfo's client any JSON), naming the key forms the
#: request's family takes and no other (``RouteFamily.refusal_message``). The url front's key
#: check and the local server send it; the HTTP API's own 401/403 cannot be reshaped.
REFUSAL_STATUS = 401
REFUSAL_CODE = "AUTHORIZATION_INVALID"
#: How a refusal names each key form.
FORM_NAMES: Final = {
    KeyForm.API_KEY: "the x-api-key header",
    KeyForm.BASIC: "the password of HTTP Basic auth",
    KeyForm.BEARER: "Authorization: Bearer",
    KeyForm.TOKEN: "?token=",
}


def refusal_message(forms: tuple[KeyForm, ...] = tuple(KeyForm)) -> str:
    """``a valid ipmeta API key is required: ...`` with ``forms`` named, the last after ``or``."""
    names = [FORM_NAMES[form] for form in forms]
    listed = names[-1] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"a valid ipmeta API key is required: {listed}"


#: Every form, for a path of no family.
REFUSAL_MESSAGE: Final = refusal_message()
#: The REST authorizer's context key holding its family's ``refusal_message``: the gateway
#: responses of the requests it judged (a refused or unknown key) read
#: ``$context.authorizer.refusal`` (REST's templates substitute variables, nothing more).
REFUSAL_CONTEXT: Final = "refusal"


def family_of_path(path: str) -> RouteFamily:
    """The family whose forms a request for ``path`` is read in, where nothing names the route
    (a function URL, the local server): the route API Gateway would match (``route_of_path``)."""
    return family_of_route(route_of_path(path)) or IPINFO_KEYS


def refusal_body(message: str = REFUSAL_MESSAGE) -> dict[str, str]:
    return {"code": REFUSAL_CODE, "error": message, "message": message}
