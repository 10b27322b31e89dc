"""The vocabulary every part of ipmeta shares: what is stored, and how it is named.

- ``keys``: the key schema (bucket of an address, sort-key encoding, version
  prefixes, the pointer and bookkeeping items, the reverse indexes);
- ``ips``: addresses and networks, parsed strictly;
- ``bogons``: the special-purpose ranges;
- ``records``: the typed records the lookup reads (version metadata, pointers, covers);
- ``errors``: the domain errors, each with its stable API code;
- ``settings``: the environment variables the stack sets and the runtime reads.

Imports: the standard library and each other only. Everything else in ipmeta,
the loader, the CLI and the stacks import these.
"""
