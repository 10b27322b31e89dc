"""The routes: what the API answers, one powertools router per family, every front alike.

- ``ip_routes``: ``/v1/ip``, ``/v1/ip/{ip}[/{field}]`` and ``/v1/batch``;
- ``dataset_routes``: ``/v1/datasets`` and ``/v1/health``;
- ``range_routes``: the reverse lookups (``/v1/ranges``, ``/v1/flagged``);
- ``geoip2_routes`` and ``ipinfo_routes``: MaxMind's and ipinfo's APIs, for their clients;
- ``page_routes``: the lookup page at ``/`` and its static files (``page/``: HTML, CSS, a little
  JavaScript and Leaflet, no build step), for people.

Imports: ``ipmeta.schema``, ``lookup``, ``store`` and ``shapes``; of the API, the top's shared
modules (``dependencies``, ``models``, ``responses``, ``observability``) and ``fronts`` (an
event's shape, the page's paths); never ``app`` or ``handler``, which import the routes.
"""
