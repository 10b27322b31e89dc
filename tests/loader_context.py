"""The Lambda context a loader task is invoked with, for the tests that call its handlers directly
or through the state machine: the local server's context, named as the loader function.

It stays in ``tests/`` rather than ``testing/``: no benchmark invokes a loader task, and
``testing/`` holds only what the tests and the benchmarks both use (``tests/unit/test_layout.py``)."""

from __future__ import annotations

from typing import cast

from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta_cli.server import LocalLambdaContext

#: A fresh invocation of the loader function: its 15 minutes ahead.
FRESH_MILLIS = 900_000


def loader_context(remaining_millis: int = FRESH_MILLIS) -> LambdaContext:
    return cast(
        LambdaContext,
        LocalLambdaContext(
            function_name="loader",
            invoked_function_arn="arn:aws:lambda:us-east-1:123456789012:function:loader",
            aws_request_id="loader-test",
            remaining_millis=remaining_millis,
        ),
    )
