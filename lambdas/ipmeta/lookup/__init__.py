"""The one lookup: which dataset versions answer, and what they answer for an address.

- ``catalog``: the datasets, their active versions and a request's targets;
- ``answers``: every address in every target version, concurrently, through the
  range cache; the API, the CLI, the tests and the benchmarks all call it;
- ``merging``: how several datasets' answers make one record (fields by precedence,
  the ranges' intersection), written once for one address and for a column of them;
- ``runs``: what one version's Query proves about a run of addresses (full and delta);
- ``covers``: a version's cover list, as lookups consult it;
- ``range_cache``: the runs a container already proved, by version;
- ``reverse``: ranges by an indexed value, and flagged ranges (scatter-gather over the GSIs).

Imports: ``ipmeta.schema`` only. The data it reads comes through small
protocols that ``ipmeta.store`` implements, so this logic runs without AWS.
"""
