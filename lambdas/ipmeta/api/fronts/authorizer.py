"""The HTTP API front's Lambda authorizer: the caller's key against the keys in one secret.

The key is read in the route family's form only (``ipmeta.api.fronts.credentials.request_key``):
``x-api-key`` on ``/v1``, HTTP Basic's password on the GeoIP2 routes, ``Bearer`` or
``?token=`` on the ipinfo routes. API Gateway calls it only when its authorizer
cache has no answer for the family's identity header (``apiKeyCacheSeconds``), so
most requests cost no invocation, and the answer depends on that header alone: a
key in another form is not read. A request without the header never gets here:
API Gateway refuses it with 401. The ipinfo routes take a header or a query
parameter, so they have no identity source and no cache.

The secret is a JSON object of client name to key. The stack generates it with
one client, ``default``; adding a pair adds a client (docs/deploy.md). The
client's name is passed on as ``$context.authorizer.client``, which the access
log records, as the REST front's log records the API key id.

It imports nothing of the API: a cold authorizer loads powertools' event class
and, on its first call, the secrets client.
"""

from __future__ import annotations

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

from ipmeta.api.fronts.credentials import API_KEY_HEADER, client_of, request_key
from ipmeta.schema.settings import ENV_API_KEYS_SECRET_ARN

__all__ = ["API_KEY_HEADER", "ENV_API_KEYS_SECRET_ARN", "client_of", "handler"]
#: How long a container trusts the keys it read. A removed key stops working
#: within this plus API Gateway's cache TTL.
KEYS_MAX_AGE_SECONDS = 300


def api_keys() -> Mapping[str, Any]:
    keys: Mapping[str, Any] = parameters.get_secret(
        os.environ[ENV_API_KEYS_SECRET_ARN], transform="json", max_age=KEYS_MAX_AGE_SECONDS
    )
    return keys


@event_source(data_class=APIGatewayAuthorizerEventV2)
def handler(event: APIGatewayAuthorizerEventV2, context: LambdaContext) -> dict[str, Any]:
    # Payload 2.0 leaves out a request's absent parts, and joins a repeated header's values with commas.
    key = request_key(event.get("routeKey"), event.get("headers"), event.get("queryStringParameters"))
    client = client_of(key, api_keys())
    response = APIGatewayAuthorizerResponseV2(
        authorize=client is not None, context={"client": client} if client else None
    )
    return response.asdict()
