"""The fronts (rest, http, url, edge: ``ipmeta.schema.settings.Front``): how a request arrives and
whether it may pass, before any route runs.

- ``front_events``: each front's event (REST's payload 1.0, an HTTP API's and a function URL's
  payload 2.0) read the same way, so one route table serves every front;
- ``credentials``: a key in every form the clients send it, each route family's forms, the one
  rule of which requests need a key (``needs_key``) and the lookup page's paths;
- ``key_check``: the url and edge fronts' key check, in the function, against the keys secret;
- ``access_log``: the url front's access log (API Gateway writes the others');
- ``authorizer`` and ``usage_plan_authorizer``: the HTTP and REST fronts' Lambda authorizers.

Imports: ``ipmeta.schema`` and powertools only; never the routes, the store or the lookup, so an
authorizer's container loads nothing of the lookup. ``ipmeta.api.app`` and the routes import these.
"""
