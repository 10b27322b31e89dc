"""What can go wrong while fetching a feed, each with a stable code.

Every class is a ``loader.errors.LoadError``, so the CLI prints it as one line
and a Lambda reports the class name as ``errorType``: the Fetch state's Retry names
the three worth trying again soon (``FeedUnavailable``, ``FeedTimeout`` and
``DownloadTruncated``: ``stacks.load.loader_workflow.FEED_RETRY_ERRORS``); the others
fail the run, and the next scheduled one tries again.
Messages name the feed, the account or the URL without its query string, and
never a key, a token or a header value.
"""

from __future__ import annotations

from loader.errors import LoadError


class FeedError(LoadError):
    """Base of every feed error: nothing was handed to a load."""

    code = "FEED_FAILED"


class FeedConfigInvalid(FeedError):
    """A ``GeoIP.conf``, a ``vendor:edition`` spec or a feed's settings cannot be used."""

    code = "FEED_CONFIG_INVALID"


class FeedAuthRefused(FeedError):
    """The vendor answered 401 or 403: the message names the account or feed, not the key."""

    code = "FEED_AUTH_REFUSED"


class FeedNotFound(FeedError):
    """The vendor answered 404: no such edition, or no release of it published yet."""

    code = "FEED_NOT_FOUND"


class FeedUnavailable(FeedError):
    """The vendor kept answering 429 or 5xx, or could not be reached, after every retry."""

    code = "FEED_UNAVAILABLE"


class FeedTimeout(FeedUnavailable):
    """The vendor stopped sending (connect or read) for longer than the timeout."""

    code = "FEED_TIMEOUT"


class FeedProtocolError(FeedError):
    """The vendor answered something its protocol does not allow (malformed metadata, a bad redirect)."""

    code = "FEED_PROTOCOL_ERROR"


class DownloadRejected(FeedError):
    """A download failed verification; nothing of it is kept."""

    code = "FEED_DOWNLOAD_REJECTED"


class DownloadTruncated(DownloadRejected):
    """Fewer bytes arrived than the vendor announced, or a compressed stream ended early."""

    code = "FEED_DOWNLOAD_TRUNCATED"


class DownloadTooLarge(DownloadRejected):
    """A download or an unpacked file is larger than the feed's cap."""

    code = "FEED_DOWNLOAD_TOO_LARGE"


class ChecksumMismatch(DownloadRejected):
    """The bytes are not the ones the vendor's checksum names."""

    code = "FEED_CHECKSUM_MISMATCH"


class ArchiveRejected(DownloadRejected):
    """An archive is corrupt, or holds a member that is unsafe or not the files expected."""

    code = "FEED_ARCHIVE_REJECTED"
