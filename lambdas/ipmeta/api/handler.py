"""Lambda entry point of the lookup API: decorators and one line, after the imports of a cold start.

``access_logged`` writes the url front's sampled access log (the API Gateway fronts
log their own); ``counting_answers`` adds each answer's status to the container's
counts and publishes them when their minute is up; SIGTERM publishes what is left
(``ipmeta.api.observability``).

The imports build some 85,000 objects that live as long as the container. With the
garbage collector on, the import runs its generational collections over them again
and again, for nothing; collecting is off while they are made, and ``gc.freeze``
then moves them out of every later collection, so a request's collections scan
only what requests make. 8% of the cold start's instructions (``bench/cold_start.py``).
"""

from __future__ import annotations

import gc

gc.disable()

from typing import Any  # noqa: E402

from aws_lambda_powertools.logging import correlation_paths  # noqa: E402
from aws_lambda_powertools.utilities.typing import LambdaContext  # noqa: E402

from ipmeta.api.app import app  # noqa: E402
from ipmeta.api.fronts.access_log import access_logged  # noqa: E402
from ipmeta.api.observability import counting_answers, logger, publish_at_shutdown  # noqa: E402

gc.freeze()
gc.enable()
publish_at_shutdown()


@access_logged
@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST)
@counting_answers
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return app.resolve(event, context)
