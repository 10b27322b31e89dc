"""Vendor feeds: find a vendor's latest release, fetch it, verify it, and hand its files to a load.

geoipupdate's job, done as a library the CLI (``ipmeta update``) and the
Fetch state call ([docs/feeds.md](../../docs/feeds.md)). The modules:

- ``feed``: the one interface every vendor implements (``latest``, ``stream``),
  the ``Release``, and the protocol of the store that remembers a
  ``loader.records.FeedState`` per feed (``FeedStateStore``);
- ``maxmind``, ``dbip``, ``ipinfo``, ``url``: one module per vendor protocol;
- ``catalogue``: the public network lists by name (AWS, Tor, ...): their URLs,
  schedules and guard limits, each list's files fetched as ``url`` feeds;
- ``fetch``: a run: ``check_feed``, ``fetch_release``,
  ``record_loaded``;
- ``verify``: sinks (``write``, ``close`` commits, ``abort`` discards), size caps,
  checksums and gzip integrity, all while streaming;
- ``archives``: unpacking a ``.tar.gz`` or ``.zip`` into exactly the files expected;
- ``http_client``: the only module that touches the network (``http.client``):
  timeouts, retries with backoff and ``Retry-After``, redirects that leave
  credentials behind;
- ``credentials``: ``Secret`` (its repr hides the value) and ``MaxMindAccount``;
- ``config``: ``GeoIP.conf``, ``vendor:edition`` specs, a feed's settings, dataset names;
- ``errors``: the feeds' errors, each a ``LoadError`` with a stable code.

Of the loader, the feeds import only ``loader.errors`` and the shared modules:
never ``pipeline``, ``store``, ``export`` or ``formats`` (the pipeline imports
the feeds, not the other way). No module here imports boto3: the sinks that
write to S3 (``loader.store.s3``) and the feed state kept in the table
(``loader.store.feed_states``, for ``ipmeta update`` and the Fetch state
alike) are the store's, behind the ``Sink`` and ``FeedStateStore`` protocols.
"""
