"""What the tests and the benchmarks both use: oracles, a stand-in store, certificates, an in-process client.

- ``row_scan``: which row owns an address (the last row in file order holding
  it), by scans that know nothing of the loader: ``brute_force`` over any rows,
  and ``CsvScan``, fast enough for a whole ASN CSV.
- ``asn_reverse``: a value's ranges in the ASN CSV (its rows minus what later
  rows take), and the values the reverse-index checks page through.
- ``index_scan``: every entry of a reverse-lookup index (a whole-index Scan).
- ``in_process_api``: the one door to the real Lambda handler in this process
  (``invoke(front, method, path, headers, body)``), a GET read as JSON,
  and every page of ``/v1/ranges``.
- ``stub_store``: a store with no DynamoDB in which every address lies in its
  own /24, so the real handler runs with no data layer to wait for.
- ``tls``: a throwaway certificate authority and a server certificate for
  127.0.0.1, for the GeoIP2 client that speaks only https.
- ``replication``: DynamoDB global tables stood in for by local DynamoDBs, one a
  region: every write applied in the other regions item by item, in random order,
  after random delays, the last writer winning.
- ``replicas``: a replica region under watch: releases and their truth, lookups
  checked against the release each answer names, the region's arrival check on an
  interval, and deletes of what a region still serves.

Each module here has a user in ``tests/`` and one in ``bench/``; what only the
tests use stays in ``tests/``. It may import the product (``ipmeta``,
``loader``, ``ipmeta_cli``) and third-party libraries, never ``tests`` nor
``bench``, and the product never imports it (``tests/unit/test_layout.py``).
"""
