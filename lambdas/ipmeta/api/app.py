"""Routes of the lookup API. Errors are mapped to responses here, in one place."""

from __future__ import annotations

from http import HTTPStatus

from aws_lambda_powertools import Metrics
from aws_lambda_powertools.event_handler import APIGatewayRestResolver, Response, content_types
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.metrics import MetricUnit

from ipmeta.api import dependencies
from ipmeta.api.models import ErrorResponse, LookupResponse
from ipmeta.errors import IpmetaError
from ipmeta.ips import parse_ip
from ipmeta.lookup import lookup_active
from ipmeta.settings import METRICS_NAMESPACE

app = APIGatewayRestResolver(enable_validation=True)
metrics = Metrics(namespace=METRICS_NAMESPACE, service="lookup")

ERROR_RESPONSES = {
    400: {"description": "Invalid input", "content": {"application/json": {"model": ErrorResponse}}},
    404: {"description": "Not found", "content": {"application/json": {"model": ErrorResponse}}},
    503: {"description": "No dataset loaded", "content": {"application/json": {"model": ErrorResponse}}},
}


def error_response(status: int, code: str, message: str) -> Response[dict[str, str]]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=ErrorResponse(code=code, message=message).model_dump(),
    )


@app.exception_handler(IpmetaError)
def handle_domain_error(error: IpmetaError) -> Response[dict[str, str]]:
    return error_response(error.status, error.code, error.message)


@app.exception_handler(RequestValidationError)
def handle_validation_error(error: RequestValidationError) -> Response[dict[str, str]]:
    return error_response(HTTPStatus.BAD_REQUEST, "REQUEST_INVALID", str(error.errors()))


@app.not_found
def handle_unknown_route(_: Exception) -> Response[dict[str, str]]:
    return error_response(HTTPStatus.NOT_FOUND, "ROUTE_NOT_FOUND", f"no route for {app.current_event.path}")


@app.get("/v1/ip/<ip>", summary="Look up one IP address", responses=ERROR_RESPONSES)  # type: ignore[arg-type]
def get_ip(ip: str) -> LookupResponse:
    deps = dependencies.current()
    result = lookup_active(deps.store, deps.versions, parse_ip(ip))
    metrics.add_metric(name="Lookups", unit=MetricUnit.Count, value=1)
    return LookupResponse.model_validate(result.to_response())
