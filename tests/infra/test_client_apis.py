"""The GeoIP2 web service and ipinfo on the REST front: a key in any form, metered by the usage plan.

The REST API reads its keys from a request authorizer (``apiKeySource: AUTHORIZER``), one
per route family so API Gateway caches each family's answer by the header it comes in; the
authorizer reads no secret and no table, and the lookup stays read-only. Refusals are 401
with a body every client reads as its own error. Context settles which datasets each
service reads and whether ipinfo answers at the root.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

import pytest
from aws_cdk import App
from aws_lambda_powertools.utilities.typing import LambdaContext

from ipmeta.api.fronts import usage_plan_authorizer
from ipmeta.api.fronts.credentials import RouteFamily, family_of_route
from ipmeta_cli.server import LocalLambdaContext, refusal
from stacks.config import ConfigError, IpmetaConfig
from stacks.constants import (
    ENV_GEOIP2_DATASETS,
    ENV_IPINFO_AT_ROOT,
    ENV_IPINFO_DATASETS,
    ENV_IPINFO_FIELDS,
    ENV_SHOW_SOURCES,
    LOOKUP_HANDLER,
    USAGE_PLAN_AUTHORIZER_HANDLER,
)
from stacks.fronts.http_front import AUTHORIZER_MEMORY_MB
from tests.authorizer_events import (
    FAMILY_FORMS,
    GEOIP2_ROUTE,
    IPINFO_ROUTE,
    NO_KEY,
    V1_ROUTE,
    admitted_forms,
    basic,
    named_forms,
    rest_authorizer_event,
)
from tests.infra.cfn import (
    as_list,
    function_by_handler,
    policy_statements_of_role,
    resources_of_type,
    rest_method_routes,
)
from tests.infra.conftest import DATASETS, DEFAULT, HTTP_API, VARIANTS, Synthesized


def _authorizers(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The REST authorizers by the construct id they were built under (``V1Keys``...)."""
    authorizers = resources_of_type(template, "AWS::ApiGateway::Authorizer")
    return {
        construct_id: properties["Properties"]
        for logical_id, properties in authorizers.items()
        for construct_id in ("V1Keys", "GeoIP2Keys", "IpinfoKeys")
        if construct_id in logical_id
    }


def test_each_route_family_has_an_authorizer_that_judges_every_request(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    authorizers = _authorizers(template)
    assert len(authorizers) == len(resources_of_type(template, "AWS::ApiGateway::Authorizer")) == 3
    function_id, _ = function_by_handler(template, USAGE_PLAN_AUTHORIZER_HANDLER)
    for properties in authorizers.values():
        assert properties["Type"] == "REQUEST"
        assert function_id in json.dumps(properties["AuthorizerUri"])
        # No identity source: API Gateway would refuse a request lacking it before the authorizer,
        # with one 401 for every family; and with none it may cache nothing.
        assert not properties.get("IdentitySource")
        assert properties["AuthorizerResultTtlInSeconds"] == 0


def test_the_key_authorizer_is_small_and_can_only_write_its_logs(synthesized: Synthesized) -> None:
    template = synthesized.templates[DEFAULT]
    _, function = function_by_handler(template, USAGE_PLAN_AUTHORIZER_HANDLER)
    assert function["Properties"]["MemorySize"] == AUTHORIZER_MEMORY_MB
    assert function["Properties"]["LoggingConfig"]["SystemLogLevel"] == "WARN"
    role_id = function["Properties"]["Role"]["Fn::GetAtt"][0]
    actions = {
        action for s in policy_statements_of_role(template, role_id) for action in as_list(s["Action"])
    }
    # API Gateway checks the key against the usage plan: no secret, no table to read
    assert actions == {"logs:CreateLogStream", "logs:PutLogEvents"}


def gateway_responses(synthesized: Synthesized) -> dict[str, dict[str, Any]]:
    """The REST front's gateway responses, by type."""
    return {
        response["Properties"]["ResponseType"]: response["Properties"]
        for response in resources_of_type(
            synthesized.templates[DEFAULT], "AWS::ApiGateway::GatewayResponse"
        ).values()
    }


def rendered(template: str, authorizer_context: dict[str, str]) -> dict[str, Any]:
    """A gateway response's body as API Gateway renders it: ``$context.authorizer.<name>``
    replaced by the authorizer's context (its templates substitute variables, nothing more)."""
    text = re.sub(
        r"\$context\.authorizer\.(\w+)", lambda found: authorizer_context.get(found[1], ""), template
    )
    body: dict[str, Any] = json.loads(text)
    return body


@pytest.mark.parametrize("response_type", ["UNAUTHORIZED", "INVALID_API_KEY", "ACCESS_DENIED"])
def test_a_missing_refused_or_unknown_key_is_a_401_every_client_reads(
    synthesized: Synthesized, response_type: str
) -> None:
    properties = gateway_responses(synthesized)[response_type]
    assert properties["StatusCode"] == "401"
    body = rendered(properties["ResponseTemplates"]["application/json"], {})
    assert body["code"] == "AUTHORIZATION_INVALID"
    assert {"code", "error", "message"} <= set(body)  # MaxMind's clients and /v1's both find theirs


#: A request of each family as the REST authorizer sees it: with no key at all, with junk where the
#: family's key goes, and with a key.
REST_REQUESTS = {
    "v1": (V1_ROUTE, [("x-api-key", NO_KEY)], [("x-api-key", "K" * 20)], []),
    "geoip": (GEOIP2_ROUTE, [("Authorization", NO_KEY)], [("Authorization", basic("42", "K" * 20))], []),
    "ipinfo": (IPINFO_ROUTE, [("Authorization", NO_KEY)], [], [("token", "K" * 20)]),
}


@pytest.mark.parametrize("family", list(REST_REQUESTS))
def test_each_familys_401_on_the_rest_front_names_its_key_forms_only(
    synthesized: Synthesized, family: str
) -> None:
    route, junk_headers, keyed_headers, keyed_query = REST_REQUESTS[family]
    responses = gateway_responses(synthesized)
    context = cast(LambdaContext, LocalLambdaContext())
    # Given the authorizer's answers (it has no identity source, so API Gateway calls it for a
    # request with no key at all too): denials (ACCESS_DENIED) of no key and of junk, and a key
    # the usage plan may not hold (INVALID_API_KEY)
    answers = [
        ("ACCESS_DENIED", usage_plan_authorizer.handler(rest_authorizer_event(route), context)),
        ("ACCESS_DENIED", usage_plan_authorizer.handler(rest_authorizer_event(route, junk_headers), context)),
        (
            "INVALID_API_KEY",
            usage_plan_authorizer.handler(rest_authorizer_event(route, keyed_headers, keyed_query), context),
        ),
    ]
    for response_type, answer in answers:
        # When API Gateway renders the 401 with the authorizer's context
        body = rendered(responses[response_type]["ResponseTemplates"]["application/json"], answer["context"])
        # Then it names the family's key forms, and no other
        assert named_forms(body["message"]) == FAMILY_FORMS[family], response_type
        assert body["error"] == body["message"]
    # And it says the same as the local REST stand-in (`ipmeta serve --api-key`) for a request
    # with no key
    assert body == json.loads(refusal(route.replace("{proxy+}", "8.8.8.8"))["body"])


def test_only_a_route_of_no_family_gets_the_401_naming_every_form(synthesized: Synthesized) -> None:
    # The one response API Gateway gives without an authorizer's context: the authorizer's
    # "Unauthorized" for a route of no family, as the local server names every form for it
    unjudged = rendered(
        gateway_responses(synthesized)["UNAUTHORIZED"]["ResponseTemplates"]["application/json"], {}
    )
    assert named_forms(unjudged["message"]) == set().union(*FAMILY_FORMS.values())
    with pytest.raises(PermissionError):
        usage_plan_authorizer.handler(
            rest_authorizer_event("/nofamily/{proxy+}"), cast(LambdaContext, LocalLambdaContext())
        )


def test_ipinfo_at_the_root_adds_the_root_methods_under_ipinfos_authorizer(synthesized: Synthesized) -> None:
    template = synthesized.templates[DATASETS]
    methods = resources_of_type(template, "AWS::ApiGateway::Method")
    [rest_api_id] = resources_of_type(template, "AWS::ApiGateway::RestApi")
    root = [
        m["Properties"]
        for m in methods.values()
        if m["Properties"].get("ResourceId") == {"Fn::GetAtt": [rest_api_id, "RootResourceId"]}
    ]
    by_method = {m["HttpMethod"]: m for m in root}
    assert sorted(by_method) == ["ANY", "GET", "HEAD"]
    [ipinfo_id] = [
        logical_id
        for logical_id in resources_of_type(template, "AWS::ApiGateway::Authorizer")
        if "IpinfoKeys" in logical_id
    ]
    assert by_method["ANY"]["AuthorizerId"] == {"Ref": ipinfo_id}
    # GET and HEAD / are the lookup page's, with no key, whoever answers the root's other methods
    assert by_method["GET"]["AuthorizationType"] == by_method["HEAD"]["AuthorizationType"] == "NONE"
    # three families and their proxies, the root and its proxy; GET and HEAD of the page and its files
    assert len(methods) == 12


# -- ipinfo's Lite and Core/Plus paths (issue 26) -----------------------------------------------

#: What HandlerLite, HandlerCore and HandlerPlus ask for, with their URLs at ``/ipinfo``...
NEWER_IPINFO_PATHS = (
    "/ipinfo/lite/8.8.8.8",
    "/ipinfo/lite/me",
    "/ipinfo/lite/8.8.8.8/asn",
    "/ipinfo/lookup",
    "/ipinfo/lookup/2001:db8::1",
    "/ipinfo/lookup/me/geo",
)
#: ...and at the root, with ``ipinfoAtRoot``.
NEWER_ROOT_PATHS = ("/lite/8.8.8.8", "/lite/me", "/lookup", "/lookup/8.8.8.8")


def _matches(template_path: str, path: str) -> bool:
    """API Gateway's match of a request path against a resource path: ``{x}`` one segment,
    ``{x+}`` one or more."""
    wanted, given = template_path.strip("/").split("/"), path.strip("/").split("/")
    for index, part in enumerate(wanted):
        if part.endswith("+}"):
            return len(given) > index
        if index >= len(given) or not (part == given[index] or part.startswith("{")):
            return False
    return len(given) == len(wanted)


def _route_of(template_paths: list[str], path: str) -> str | None:
    """The resource (or route) API Gateway picks for ``path``: the most specific that matches."""
    matching = [candidate for candidate in template_paths if _matches(candidate, path)]
    return max(
        matching,
        key=lambda candidate: (candidate.count("/") - candidate.count("{"), len(candidate)),
        default=None,
    )


def _rest_methods(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Each REST resource's full path -> its ANY method's properties."""
    [rest_api_id] = resources_of_type(template, "AWS::ApiGateway::RestApi")
    root = json.dumps({"Fn::GetAtt": [rest_api_id, "RootResourceId"]})
    resources = resources_of_type(template, "AWS::ApiGateway::Resource")

    def path_of(reference: Any) -> str:
        if json.dumps(reference) == root:
            return ""
        resource = resources[reference["Ref"]]["Properties"]
        return f"{path_of(resource['ParentId'])}/{resource['PathPart']}"

    return {
        path_of(method["Properties"]["ResourceId"]) or "/": method["Properties"]
        for method in resources_of_type(template, "AWS::ApiGateway::Method").values()
        if method["Properties"]["HttpMethod"] == "ANY"
    }


@pytest.mark.parametrize("variant", [DEFAULT, DATASETS])
def test_ipinfos_lite_and_lookup_paths_reach_the_lookup_on_the_rest_front(
    synthesized: Synthesized, variant: str
) -> None:
    # Given the REST front, with ipinfo at the root (DATASETS) or not (DEFAULT)
    template = synthesized.templates[variant]
    methods = _rest_methods(template)
    lookup_id, _ = function_by_handler(template, LOOKUP_HANDLER)
    ipinfo_family = methods["/ipinfo/{proxy+}"]
    at_root = variant == DATASETS
    # When HandlerLite or HandlerCore asks: Then ipinfo's proxy (or the root's) sends it to the lookup,
    # under ipinfo's authorizer, like the classic routes
    for path in (*NEWER_IPINFO_PATHS, *(NEWER_ROOT_PATHS if at_root else ())):
        resource = _route_of(list(methods), path)
        assert resource is not None, path
        method = methods[resource]
        assert lookup_id in json.dumps(method["Integration"]["Uri"]), path
        assert method["AuthorizerId"] == ipinfo_family["AuthorizerId"], path
        assert method["ApiKeyRequired"] is True
    if not at_root:
        assert [_route_of(list(methods), path) for path in NEWER_ROOT_PATHS] == [None] * len(NEWER_ROOT_PATHS)


def test_ipinfos_lite_and_lookup_paths_reach_the_lookup_on_the_http_front(synthesized: Synthesized) -> None:
    # Given the HTTP API front with ipinfo at the root
    template = synthesized.templates[HTTP_API]
    routes = {
        route["Properties"]["RouteKey"].split(" ", 1)[1]: route["Properties"]
        for route in resources_of_type(template, "AWS::ApiGatewayV2::Route").values()
        if route["Properties"]["RouteKey"].startswith("GET ")
    }
    ipinfo_family = routes["/ipinfo/{proxy+}"]
    assert VARIANTS[HTTP_API]["ipinfoAtRoot"] is True
    # When a newer handler asks: Then a GET route of ipinfo's family takes it, with ipinfo's authorizer
    for path in (*NEWER_IPINFO_PATHS, *NEWER_ROOT_PATHS):
        route = _route_of(list(routes), path)
        assert route is not None, path
        assert routes[route]["AuthorizerId"] == ipinfo_family["AuthorizerId"], path
        assert routes[route]["Target"] == ipinfo_family["Target"], path


def test_the_lookup_reads_the_client_api_settings_from_its_environment(synthesized: Synthesized) -> None:
    context = VARIANTS[DATASETS]
    _, function = function_by_handler(synthesized.templates[DATASETS], LOOKUP_HANDLER)
    variables = function["Properties"]["Environment"]["Variables"]
    assert json.loads(variables[ENV_GEOIP2_DATASETS]) == context["geoip2Datasets"]
    assert variables[ENV_IPINFO_DATASETS] == "city,asn"
    assert json.loads(variables[ENV_IPINFO_FIELDS]) == context["ipinfoFields"]
    assert variables[ENV_IPINFO_AT_ROOT] == "true"
    _, default = function_by_handler(synthesized.templates[DEFAULT], LOOKUP_HANDLER)
    defaults = default["Properties"]["Environment"]["Variables"]
    assert (defaults[ENV_GEOIP2_DATASETS], defaults[ENV_IPINFO_AT_ROOT]) == ("{}", "false")
    # /v1/datasets shows sources whole only where the admin option says so
    assert (variables[ENV_SHOW_SOURCES], defaults[ENV_SHOW_SOURCES]) == ("true", "false")


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"geoip2Datasets": {"precision": ["city"]}}, "no service 'precision'"),
        ({"geoip2Datasets": {"city": ["City!"]}}, "dataset"),
        ({"ipinfoFields": {"hostname": "host"}}, "ipinfo has no field"),
        ({"ipinfoFields": '{"loc": "latlon"}'}, "reads 2 column"),
        ({"ipinfoDatasets": "city,Bad Name"}, "dataset"),
    ],
)
def test_client_api_settings_are_checked_at_synth(context: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        IpmetaConfig.from_node(App(context=context).node)


def test_client_api_settings_parse_from_the_command_line() -> None:
    config = IpmetaConfig.from_node(
        App(
            context={
                "geoip2Datasets": '{"city": ["city", "asn"]}',
                "ipinfoDatasets": "city,asn",
                "ipinfoAtRoot": "true",
            }
        ).node
    )
    assert config.geoip2_datasets == {"city": ["city", "asn"]}
    assert config.ipinfo_datasets == ["city", "asn"]
    assert config.ipinfo_at_root is True


def family_of(route: str) -> RouteFamily:
    family = family_of_route(route)
    assert family is not None, route
    return family


@pytest.mark.parametrize("variant", [DEFAULT, DATASETS])  # DATASETS: ipinfo at the root too
def test_each_authorizer_admits_exactly_its_familys_forms(synthesized: Synthesized, variant: str) -> None:
    template = synthesized.templates[variant]
    authorizers = resources_of_type(template, "AWS::ApiGateway::Authorizer")
    routes: dict[str, set[str]] = {}
    pages = set()
    for path, method in rest_method_routes(template):
        if method["HttpMethod"] == "OPTIONS":
            continue
        if "AuthorizerId" not in method:
            pages.add((method["HttpMethod"], path))
            continue
        routes.setdefault(method["AuthorizerId"]["Ref"], set()).add(path)
    # Only the lookup page and its files go without an authorizer
    assert pages == {(method, path) for method in ("GET", "HEAD") for path in ("/", "/static/{proxy+}")}
    assert set(routes) == set(authorizers)
    for paths in routes.values():
        for path in paths:
            # The forms the real handler admits on this route, each sent alone, are its family's
            forms = admitted_forms("rest", path, None)
            assert forms == set(family_of(path).forms), path
