"""The lookup function and the front before it: one protocol, a module per front, and the edge.

- ``lookup_api``: ``LookupApi``, the lookup function and the front ``apiType`` names, chosen
  from its ``FRONTS`` table;
- ``lookup_front``: ``LookupFront``, the protocol every front meets;
- ``rest_front``, ``http_front``, ``url_front``: the REST API, the HTTP API (the default), the
  function's own URL (the cheapest);
- ``edge``: CloudFront before any of them (``edge``);
- ``front_metrics``: a front as the dashboard and the alarms see it (``MonitoredFront``).

It may import the shared modules of ``stacks`` (``config``, ``constants``, ``function``, ``nag``)
and the lookup's own vocabulary (``ipmeta``), never another sub-package of ``stacks``.
"""
