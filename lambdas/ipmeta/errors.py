"""Domain errors with their stable API codes.

Each error knows its HTTP status and code; the API maps them to responses in
one place (``ipmeta.api.app``), so no route builds an error body.
"""

from __future__ import annotations


class IpmetaError(Exception):
    """Base of every error that reaches a user with a stable code."""

    status = 500
    code = "INTERNAL_ERROR"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidIpAddress(IpmetaError, ValueError):
    status = 400
    code = "IP_ADDRESS_INVALID"


class IpAddressNotFound(IpmetaError):
    status = 404
    code = "IP_ADDRESS_NOT_FOUND"


class NoDataset(IpmetaError):
    status = 503
    code = "NO_DATASET"


class VersionNotFound(IpmetaError):
    status = 404
    code = "VERSION_NOT_FOUND"


class ActivationConflict(IpmetaError):
    """The pointer no longer names the version a load started from."""

    status = 409
    code = "ACTIVATION_CONFLICT"
