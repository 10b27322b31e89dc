"""The loader's errors, each with a stable code.

They never reach the HTTP API: the CLI prints them as one line, and a Lambda
reports the class name as ``errorType``, which the state machine's Retry and
Catch match on (``WritesThrottled``), so class names are part of the contract.
"""

from __future__ import annotations

from typing import Any


def _restore(kind: type[LoadError], message: str, state: dict[str, Any]) -> LoadError:
    error = kind.__new__(kind)
    Exception.__init__(error, message)
    error.__dict__.update(state)
    return error


class LoadError(Exception):
    """Base of every error a load reports with a stable code."""

    code = "LOAD_FAILED"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Whole, with its reasons, when a task in a worker process raises it to the driver.
        return (_restore, (type(self), self.message, self.__dict__))


class LoadRejected(LoadError):
    """The source failed validation: ``reasons`` holds one ``line N: reason`` per bad row."""

    code = "LOAD_REJECTED"

    def __init__(self, message: str, reasons: list[str] | None = None) -> None:
        super().__init__(message)
        self.reasons = reasons or []


class SourceError(LoadRejected):
    """A file the loader cannot read at all; the message names the file and line."""

    code = "SOURCE_UNREADABLE"

    def __init__(self, message: str) -> None:
        super().__init__(message, [message])


class OverlapRejected(LoadRejected):
    """``--overlaps reject`` met two rows that share addresses."""

    code = "OVERLAP_REJECTED"


class ActivationConflict(LoadError):
    """The pointer no longer names the version a load started from."""

    code = "ACTIVATION_CONFLICT"


class LoadInProgress(LoadError):
    """Another load holds the lock and its lease has not expired."""

    code = "LOAD_IN_PROGRESS"


class LoadNotFound(LoadError):
    code = "LOAD_NOT_FOUND"


class LoadIncomplete(LoadError):
    """Activation was asked for before every chunk was written."""

    code = "LOAD_INCOMPLETE"


class LoadNotWritable(LoadError):
    """A chunk or an activation of a load that is not (or no longer) prepared."""

    code = "LOAD_NOT_WRITABLE"


class VerificationFailed(LoadError):
    """The written partitions do not hold the items the load planned."""

    code = "LOAD_VERIFICATION_FAILED"


class VerificationPending(LoadError):
    """Activation's count of the version ran out of time; what it counted is saved, and the next
    attempt (the state machine retries Activate on this error) counts only the rest."""

    code = "LOAD_VERIFICATION_PENDING"


class ExportTooLarge(LoadError):
    """The Export task (a Lambda) would not write a version this large within its time
    (``loader.pipeline.export_task.max_export_items``, measured by ``bench.mmdb_export``); it
    refuses before any work, and ``ipmeta export`` writes it on a machine instead."""

    code = "EXPORT_TOO_LARGE"


class VersionNotRestorable(LoadError):
    """Rollback (or an activation) named a version that cleanup is deleting, or partly deleted."""

    code = "VERSION_NOT_RESTORABLE"


class WritesThrottled(LoadError):
    """DynamoDB kept refusing a batch after every retry; Step Functions retries the task.

    The class name is what a Lambda reports as ``errorType``, so the state
    machine's throttling Retry lists it beside DynamoDB's own exception names.
    """

    code = "WRITES_THROTTLED"


class EdgeInvalidationFailed(LoadError):
    """CloudFront refused or kept throttling the ``/*`` invalidation after an activation.

    The version answers already; Step Functions retries Activate, which asks again under the
    same reference (``loader.store.edge_cache``), and fails the run if CloudFront never takes it:
    answers cached before the switch would otherwise be served until they expire.
    """

    code = "EDGE_INVALIDATION_FAILED"


class ReleaseHeld(LoadError):
    """The release loaded whole, but the guard held it (``loader.pipeline.guard``): it does not serve."""

    code = "RELEASE_HELD"
