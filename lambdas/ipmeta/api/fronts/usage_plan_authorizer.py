"""The REST front's request authorizer: the caller's key, in its family's form, handed to the usage plan.

The REST API reads API keys from its authorizer (``apiKeySource: AUTHORIZER``),
so a key sent as HTTP Basic's password (GeoIP2 clients), ``Bearer`` or
``?token=`` (ipinfo clients) meters and throttles exactly as ``x-api-key`` does.
Each family's key is read in that family's forms only (``credentials.request_key``).
The stack gives these authorizers no identity source, so API Gateway caches nothing and
calls this for every keyed request, one with no key at all included.
This function does not judge the key: it returns it as ``usageIdentifierKey``
and API Gateway checks it against the usage plan's keys, answering 401
``AUTHORIZATION_INVALID`` (the gateway response the stack sets) for a key no
plan holds. So it needs no secret and no table: nothing to read, nothing to leak.

A request with no key in its family's form, or an ambiguous one, is denied here (API Gateway's
ACCESS_DENIED, which the stack answers as a 401). Every answer carries the family's refusal
message in its context (``credentials.REFUSAL_CONTEXT``), so the 401 of a denied or unknown key
names the forms of the request's family and no other. A route of no family is "Unauthorized".
"""

from __future__ import annotations

import hashlib
from typing import Any

from aws_lambda_powertools.utilities.data_classes import event_source
from aws_lambda_powertools.utilities.data_classes.api_gateway_authorizer_event import (
    APIGatewayAuthorizerRequestEvent,
    APIGatewayAuthorizerResponse,
)
from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.api.fronts.credentials import REFUSAL_CONTEXT, family_of_route, request_key

#: The message API Gateway turns into its 401 UNAUTHORIZED response.
UNAUTHORIZED = "Unauthorized"
#: Whom a denial names: nobody's key.
REFUSED_PRINCIPAL = "refused"


def principal_of(key: str) -> str:
    """A stable name for the key in access logs that is not the key itself."""
    return "key-" + hashlib.sha256(key.encode()).hexdigest()[:16]


@event_source(data_class=APIGatewayAuthorizerRequestEvent)
def handler(event: APIGatewayAuthorizerRequestEvent, context: LambdaContext) -> dict[str, Any]:
    route = event.get("resource")
    family = family_of_route(route) if isinstance(route, str) else None
    if family is None:
        raise PermissionError(UNAUTHORIZED)  # API Gateway answers its UNAUTHORIZED response
    key = request_key(
        route,
        event.get("headers"),
        event.get("queryStringParameters"),
        event.get("multiValueHeaders"),
        event.get("multiValueQueryStringParameters"),
    )
    refusal = {REFUSAL_CONTEXT: family.refusal_message}
    if key is None:
        denied = APIGatewayAuthorizerResponse.from_route_arn(event.method_arn, REFUSED_PRINCIPAL, refusal)
        denied.deny_all_routes()
        return denied.asdict()
    response = APIGatewayAuthorizerResponse.from_route_arn(
        event.method_arn, principal_of(key), refusal, usage_identifier_key=key
    )
    # Every method of the stage: were the answer cached (by an identity source, which the
    # stack gives none), it would serve all of the family's methods.
    response.allow_all_routes()
    return response.asdict()
