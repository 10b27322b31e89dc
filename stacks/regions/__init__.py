"""What several regions add: the table's replicas, each region's arrival check, one hostname.

- ``replicas``: home's part (the table's and secrets' replicas, the shared REST key);
- ``arrival_check``: a replica region's check that a version has wholly arrived;
- ``regional_hostname``: one name over every region's front, by latency, while healthy.

It may import the shared modules of ``stacks`` and ``fronts`` (the front a region serves),
never ``load`` or ``monitoring``.
"""
