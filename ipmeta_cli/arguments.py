"""Argument types shared by the commands: bad values fail at parse time with a clear message."""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _whole_number_at_least(minimum: int, rule: str) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"{value} {rule}")
        return value

    return parse


positive_int = _whole_number_at_least(1, "must be at least 1")


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None


def share(text: str) -> float:
    """A share above 0 and at most 1 (``0.25``)."""
    value = _number(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"{value} must be above 0 and at most 1")
    return value


non_negative_int = _whole_number_at_least(0, "must not be negative")


def non_negative_float(text: str) -> float:
    """A finite number, 0 or above (seconds, say)."""
    value = _number(text)
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{value} must be a finite number, 0 or above")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (seconds, say)."""
    value = _number(text)
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{value} must be a finite number above 0")
    return value


def dataset_name(text: str) -> str:
    """A dataset name as ``ipmeta.schema.keys`` allows it (lower-case letters, digits, ``-``)."""
    from ipmeta.schema import keys

    try:
        return keys.check_dataset_name(text.strip())
    except keys.DatasetNameInvalid as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def dataset_names(text: str) -> str:
    """``city,asn``: names checked one by one, passed on as the API's ``?datasets=`` takes them."""
    return ",".join(dataset_name(name) for name in text.split(",") if name.strip())


def region_name(text: str) -> str:
    """An AWS region's name (``eu-west-1``), as the key of a replica region's pointer takes it."""
    from ipmeta.schema import keys

    try:
        return keys.check_region_name(text.strip())
    except keys.RegionNameInvalid as error:
        raise argparse.ArgumentTypeError(str(error)) from None


#: The API key of `ipmeta lookup --endpoint` (and the key `ipmeta serve` requires), read from the
#: environment: unlike ``--api-key KEY``, never on the command line that ``ps`` shows every user.
ENV_API_KEY = "IPMETA_API_KEY"
#: A key file is a few lines; anything bigger is not one.
MAX_KEY_FILE_BYTES = 64 * 1024


def key_file(text: str) -> list[str]:
    """The keys in a file, one a line (blank lines and ``#`` comments skipped), read when the
    arguments are parsed, so a missing, unreadable or empty file stops the command at once."""
    try:
        with open(text, "rb") as handle:
            content = handle.read(MAX_KEY_FILE_BYTES + 1)
        lines = content.decode("utf-8").splitlines()
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {text}: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{text} is not UTF-8 text") from None
    if len(content) > MAX_KEY_FILE_BYTES:
        raise argparse.ArgumentTypeError(f"{text} is over {MAX_KEY_FILE_BYTES} bytes: not a key file")
    keys = [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not keys:
        raise argparse.ArgumentTypeError(f"{text} holds no key")
    return keys
