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


class IndexNotArrived(IpmetaError):
    """A reverse lookup of a version whose index entries have not all reached this region's GSIs
    (they lag the table: ``loader.pipeline.arrival`` counts them); asking again later answers."""

    status = 503
    code = "INDEX_NOT_ARRIVED"


class IpAddressReserved(IpAddressNotFound):
    """A bogon (private, loopback, documentation...) that the dataset has no range for.

    A kind of not-found: callers that handle "no range" need not know about bogons."""

    status = 404
    code = "IP_ADDRESS_RESERVED"


class FieldNotFound(IpmetaError):
    status = 404
    code = "FIELD_NOT_FOUND"


class VersionInvalid(IpmetaError):
    status = 400
    code = "VERSION_INVALID"


class BatchTooLarge(IpmetaError):
    status = 400
    code = "BATCH_TOO_LARGE"


class BatchAnswerTooLarge(IpmetaError):
    """The answer would pass what a Lambda response carries (``ipmeta.shapes.batch_json``)."""

    status = 413
    code = "BATCH_ANSWER_TOO_LARGE"


class BatchBodyNotJson(IpmetaError):
    status = 400
    code = "BATCH_BODY_NOT_JSON"


class BatchBodyNotArray(IpmetaError):
    status = 400
    code = "BATCH_BODY_NOT_ARRAY"


class BatchItemNotString(IpmetaError):
    status = 400
    code = "BATCH_ITEM_NOT_STRING"


class DatasetStale(IpmetaError):
    """Health: the active dataset is older than the configured maximum age."""

    status = 503
    code = "DATASET_STALE"


class RequestInvalid(IpmetaError):
    """A query parameter breaks its documented schema."""

    status = 400
    code = "REQUEST_INVALID"


class FieldNotIndexed(IpmetaError):
    """``/v1/ranges``: ``field`` is missing, or not the field the version was indexed by."""

    status = 400
    code = "FIELD_NOT_INDEXED"


class ValueMissing(IpmetaError):
    status = 400
    code = "VALUE_MISSING"


class ValueInvalid(IpmetaError):
    status = 400
    code = "VALUE_INVALID"


class LimitInvalid(IpmetaError):
    status = 400
    code = "LIMIT_INVALID"


class InvalidToken(IpmetaError):
    """A ``next`` token that is malformed, tampered with, or from another query."""

    status = 400
    code = "INVALID_TOKEN"


class FlagsNotIndexed(IpmetaError):
    """``/v1/flagged``: the version was loaded without ``--flag-column``."""

    status = 404
    code = "FLAGS_NOT_INDEXED"


class DatasetInvalid(IpmetaError):
    """A dataset name outside ``keys.DATASET_NAME`` (``?datasets=``, ``?version=``, ``dataset=``)."""

    status = 400
    code = "DATASET_INVALID"


class DatasetNotFound(IpmetaError):
    """A dataset name the table does not hold and the deployment does not declare."""

    status = 404
    code = "DATASET_NOT_FOUND"


class BatchItemTooLong(IpmetaError):
    """A batch item longer than any item the route answers: refused whole, never echoed."""

    status = 400
    code = "BATCH_ITEM_TOO_LONG"


class AuthorizationInvalid(IpmetaError):
    """No key in the route family's form, or one no client has: refused before any read.

    Raised by the function itself behind the url front (``ipmeta.api.fronts.key_check``); the API
    Gateway fronts refuse such a request before it reaches the function."""

    status = 401
    code = "AUTHORIZATION_INVALID"


class RouteNotServed(IpmetaError):
    """A route the URL that was called does not serve (the batch alias's URL: batches only)."""

    status = 404
    code = "ROUTE_NOT_FOUND"


# -- refusals of the front, before the function: the local server's (API Gateway has its own) --


class RequestMalformed(IpmetaError):
    """The HTTP message cannot be read: its request line, Content-Length, chunks or a header."""

    status = 400
    code = "REQUEST_MALFORMED"


class RequestTimeout(IpmetaError):
    """The request did not arrive whole within the server's read timeout."""

    status = 408
    code = "REQUEST_TIMEOUT"


class RequestTooLarge(IpmetaError):
    """A body over API Gateway's 10 MB payload limit, refused before it is read."""

    status = 413
    code = "REQUEST_TOO_LARGE"


class UriTooLong(IpmetaError):
    status = 414
    code = "URI_TOO_LONG"


class HeadersTooLarge(IpmetaError):
    status = 431
    code = "HEADERS_TOO_LARGE"


class NotImplementedByServer(IpmetaError):
    """A method, or a transfer coding, the server does not implement."""

    status = 501
    code = "NOT_IMPLEMENTED"


class ServerBusy(IpmetaError):
    """Every connection slot is busy with a request: none idle to close for a newcomer."""

    status = 503
    code = "SERVER_BUSY"


class HttpVersionNotSupported(IpmetaError):
    status = 505
    code = "HTTP_VERSION_NOT_SUPPORTED"
