"""The lookup API: powertools routes, the fronts' key checks and authorizers, the thin handler.

At the top, what every request passes through whatever front it came by:

- ``handler``: the lookup function's entry point (decorators and one line);
- ``app``: the resolver, CORS, the one place errors become responses, the OpenAPI document;
- ``dependencies``: the per-container singletons (store, catalog, range cache, pool) and the
  counts of what the lookups did;
- ``models`` and ``responses``: the documented bodies, headers and error answers;
- ``observability``: the logger and the metrics line (counted in memory, one EMF line a
  minute at most per container).

By role, each sub-package with a docstring naming its modules and what it may import:

- ``fronts/``: how a request arrives (rest, http, url, edge; ``ipmeta.schema.settings.Front``)
  and whether it may pass: each front's event, the key forms, the key check, the access log,
  both authorizers;
- ``routes/``: what the API answers: ipmeta's ``/v1``, MaxMind's and ipinfo's APIs, the
  reverse lookups, the lookup page and its files.

Imports: every other ipmeta package (``schema``, ``lookup``, ``store``, ``shapes``); ``routes``
may import ``fronts``, never the other way; nothing imports the API but the handlers' callers
(Lambda, the local server, tests).
"""
