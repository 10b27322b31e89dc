"""The HTTP API front's Lambda authorizer: the caller's ``x-api-key`` against the keys in one secret.

API Gateway calls it only when its authorizer cache has no answer for the
header's value (``apiKeyCacheSeconds``), so most requests cost no invocation. A
request without the header never gets here: API Gateway refuses it with 401.

The secret is a JSON object of client name to key. The stack generates it with
one client, ``default``; adding a pair adds a client (docs/deploy.md). The
client's name is passed on as ``$context.authorizer.client``, which the access
log records, as the REST front's log records the API key id.

It imports nothing of the API: a cold authorizer loads powertools' event class
and, on its first call, the secrets client.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Mapping
from typing import Any

from aws_lambda_powertools.utilities import parameters
from aws_lambda_powertools.utilities.data_classes import event_source
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerEventV2,
    APIGatewayAuthorizerResponseV2,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

ENV_API_KEYS_SECRET_ARN = "IPMETA_API_KEYS_SECRET_ARN"
API_KEY_HEADER = "x-api-key"
#: How long a container trusts the keys it read. A removed key stops working
#: within this plus API Gateway's cache TTL.
KEYS_MAX_AGE_SECONDS = 300


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


def api_keys() -> Mapping[str, Any]:
    keys: Mapping[str, Any] = parameters.get_secret(
        os.environ[ENV_API_KEYS_SECRET_ARN], transform="json", max_age=KEYS_MAX_AGE_SECONDS
    )
    return keys


@event_source(data_class=APIGatewayAuthorizerEventV2)
def handler(event: APIGatewayAuthorizerEventV2, context: LambdaContext) -> dict[str, Any]:
    client = client_of(event.headers.get(API_KEY_HEADER), api_keys())
    response = APIGatewayAuthorizerResponseV2(
        authorize=client is not None, context={"client": client} if client else None
    )
    return response.asdict()
