"""The lookup API: powertools routes, the key authorizers and the thin Lambda handlers.

- ``handler``: the lookup function's entry point (decorators and one line);
- ``app``: the resolver, CORS, the one place errors become responses, the OpenAPI document;
- ``ip_routes``: ``/v1/ip``, ``/v1/ip/{ip}[/{field}]`` and ``/v1/batch``;
- ``dataset_routes``: ``/v1/datasets`` and ``/v1/health``;
- ``range_routes``: the reverse lookups (``/v1/ranges``, ``/v1/flagged``);
- ``geoip2_routes`` and ``ipinfo_routes``: MaxMind's and ipinfo's APIs, for their clients;
- ``page_routes``: the lookup page at ``/`` and its static files (``page/``: HTML, CSS, a little
  JavaScript and Leaflet, no build step), for people;
- ``dependencies``: the per-container singletons (store, catalog, range cache, pool) and the
  counts of what the lookups did;
- ``models`` and ``responses``: the documented bodies, headers and error answers;
- ``observability``: the logger and the metrics line (counted in memory, one EMF line a
  minute at most per container);
- ``credentials``: a key in every form the clients send it;
- ``authorizer`` and ``usage_plan_authorizer``: the API Gateway fronts' key checks;
- ``front_events``: each front's event (REST's payload 1.0, an HTTP API's and a function URL's
  payload 2.0) read the same way, so one route table serves every front;
- ``key_check``: the url front's key check, in the function; ``access_log``: its access log.

Imports: every other ipmeta package (``schema``, ``lookup``, ``store``, ``shapes``);
nothing imports the API but the handlers' callers (Lambda, the local server, tests).
"""
