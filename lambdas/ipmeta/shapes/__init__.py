"""The answer documents: how a lookup's result is written for each kind of client.

- ``exact_json``: every stored value as JSON of its exact type and digits;
- ``ipmeta_document``: ipmeta's own answer (merged data, each dataset's section);
- ``geoip2_document``: MaxMind's GeoIP2 web-service documents;
- ``geoip2_records``: MaxMind's records, the kind of each field, and the flat layouts that name them;
- ``ipinfo_document``: ipinfo's answers: the classic flat details, Lite and Core;
- ``batch_json``: a batch's answer, joined entry by entry and refused before it outgrows what a
  Lambda response carries.

Imports: ``ipmeta.schema`` and ``ipmeta.lookup`` (the result they shape); never
``ipmeta.store`` or ``ipmeta.api``.
"""
