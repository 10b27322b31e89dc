"""The hostile-input suite: every entry point, attacked as an outsider would, each case named.

One module per entry point: ``test_http_api`` (requests to every route, through the
handler and through the local server), ``test_local_server`` (HTTP framing, sizes and
time), ``test_source_files`` (files given to ``ipmeta load``: CSV, MaxMind DB,
GeoIP2 and DB-IP CSV, archives), ``test_vendor_releases`` (what a feed downloads),
``test_column_names`` (columns that share a name with a GeoIP2 or ipinfo record), and
``test_template`` (the deployed authorizers and the stack's options). Each case is a
pytest id that says what it sends; every case must refuse cleanly (a stable error
code, a line number for a row), in bounded memory and time, with what is active
still serving. The whole suite runs in under two minutes (``make test`` runs it).
"""
