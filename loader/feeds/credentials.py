"""Credentials a feed sends, held so that printing them shows nothing.

A ``Secret``'s ``repr`` and ``str`` are a fixed mask: a credential that reaches a
log line, an error, a report or a Step Functions payload by mistake shows as
``Secret('********')``. Only the HTTP module calls ``reveal()``, to build a header.
In AWS the values come from Secrets Manager (powertools parameters, in the fetch
function alone); locally from a ``GeoIP.conf`` or the environment.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

MASK = "********"


class Secret:
    """A credential's value: hidden from ``repr``, ``str``, f-strings and pickling by mistake."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not value:
            raise ValueError("a secret cannot be empty")
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    __str__ = __repr__

    def __format__(self, spec: str) -> str:
        return repr(self)

    def __reduce__(self) -> tuple[object, ...]:
        # A secret never travels to another process or into a payload as bytes.
        raise TypeError("a Secret is not serialized; pass the secret's name and read it where it is used")


def basic_authorization(user: str, password: str) -> Secret:
    """An ``Authorization: Basic`` value (RFC 7617): itself a secret, as it decodes to the password."""
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    return Secret(f"Basic {token}")


@dataclass(frozen=True)
class MaxMindAccount:
    """A MaxMind account: geoipupdate sends the ID and licence key as HTTP Basic user and password."""

    account_id: int
    license_key: Secret

    def authorization(self) -> Secret:
        return basic_authorization(str(self.account_id), self.license_key.reveal())

    def describe(self) -> str:
        return f"MaxMind account {self.account_id}"
