"""The caller's API key, in any of the forms the clients ipmeta stands in for send it.

- ``x-api-key: KEY``: ipmeta's own clients and API Gateway's usage plans;
- ``Authorization: Basic base64(account:KEY)``: MaxMind's GeoIP2 clients send the
  account id and licence key; the password is the ipmeta key, the account is ignored;
- ``Authorization: Bearer KEY``: the ipinfo clients;
- ``?token=KEY``: ipinfo's query form (``curl host/8.8.8.8?token=KEY``).

The first form present wins, in that order. Every front reads the key with
``presented_key``: the REST front's request authorizer (which hands it to the
usage plan), the HTTP API's authorizer (which compares it with the keys in its
secret) and the local server (``ipmeta serve --api-key``). Pure: no AWS here.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Mapping
from typing import Any

API_KEY_HEADER = "x-api-key"
AUTHORIZATION_HEADER = "authorization"
TOKEN_PARAMETER = "token"


def _header(headers: Mapping[str, str] | None, name: str) -> str | None:
    """A header by name in any case: API Gateway keeps the client's spelling in REST events."""
    if not headers:
        return None
    if name in headers:
        return headers[name]
    return next((value for key, value in headers.items() if key.lower() == name), None)


def key_of_authorization(value: str) -> str | None:
    """The key in an ``Authorization`` value: Basic's password, or Bearer's token."""
    scheme, _, credentials = value.strip().partition(" ")
    credentials = credentials.strip()
    if scheme.lower() == "bearer":
        return credentials or None
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(credentials, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    _, colon, password = decoded.partition(":")
    return password if colon and password else None


def presented_key(headers: Mapping[str, str] | None, query: Mapping[str, str] | None) -> str | None:
    """The key the request carries, or None when it carries none in a form we read."""
    if key := _header(headers, API_KEY_HEADER):
        return key
    if (authorization := _header(headers, AUTHORIZATION_HEADER)) and (
        key := key_of_authorization(authorization)
    ):
        return key
    return (query or {}).get(TOKEN_PARAMETER) or None


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
#: clients ``code`` and ``message``, ipinfo's client any JSON). The REST front's gateway
#: responses and the local server send it; the HTTP API's own 401/403 cannot be reshaped.
REFUSAL_STATUS = 401
REFUSAL_CODE = "AUTHORIZATION_INVALID"
REFUSAL_MESSAGE = (
    "a valid ipmeta API key is required: x-api-key, the password of HTTP Basic auth, "
    "Authorization: Bearer, or ?token="
)


def refusal_body(message: str = REFUSAL_MESSAGE) -> dict[str, str]:
    return {"code": REFUSAL_CODE, "error": message, "message": message}
