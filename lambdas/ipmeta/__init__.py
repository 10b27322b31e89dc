"""ipmeta: what the lookup Lambda ships, grouped by role (``lambdas/`` is its asset).

- ``schema``: the key schema, addresses, bogons, stored records, errors, settings;
- ``lookup``: the one lookup (catalog, answers, runs, covers, range cache, reverse);
- ``store``: its data access, the only boto3 (reads only);
- ``shapes``: the answer documents (ipmeta's, GeoIP2's, ipinfo's);
- ``api``: powertools routes, authorizers and the thin handlers.

The loader, the CLI, the CDK stack (key attribute names, settings) and the tests
import it; it imports none of them. ``tests/unit/test_layout.py`` holds the
import direction between its packages.
"""
