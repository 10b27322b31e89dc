"""The loader's data access: the only loader code that calls boto3.

The table, one small class per concern, each holding the client, the table's
name and one dataset's keys (``dataset_items``):

- ``table``: ``LoaderTable``, the concerns below in one dataset's keys, and the
  lookup's own reads (``ipmeta.store.dynamodb.Store``) on the same client;
- ``versions``: the pointer switch, the version counter, version metadata and
  the table's list of datasets;
- ``loads``: each load's item, its status and its chunk marks;
- ``load_lock``: the dataset's load lock;
- ``manifests``: the items each partition of a version must hold;
- ``cover_lists``: a version's cover list and its cover heads (with their
  reverse-index entries);
- ``partition_items``: whole partitions counted, read in order, deleted;
- ``partition_counts``: a version's items and index entries counted a batch at a
  time, the partitions found complete saved, so a count resumes where it stopped;
- ``feed_states``: the release of a dataset's feed loaded last, and its failed
  runs in a row;
- ``region_pointers``: home's pointer with its generation, each replica region's
  own pointer and the versions that wholly arrived there;
- ``batch_writes``: BatchWriteItem with counted retries (``WriteStats``);
- ``dataset_items``: what every concern shares (a consistent read, an update, a
  partition's Query);
- ``table_creation``: the table from the key schema, for local runs.

And the rest of AWS:

- ``s3``: the source bucket, its staging prefix (``S3Staging``), downloads and uploads;
- ``events``: the ``DatasetActivated`` change event (EventBridge, or a log line locally);
- ``edge_cache``: the ``/*`` invalidation of CloudFront's cache (``edge``) after a switch;
- ``staging``: the staging area between states (a folder locally, a prefix in AWS);
- ``source``: a load's files, local or ``s3://``, made local for the readers.
- ``enrich_objects``: an enrich job's input listed, its manifests read, its parts list and
  summary written, a failed job's parts deleted;
- ``enrich_executions``: the enrich state machine found by its stack, started and watched.

May import the shared modules of ``loader`` and the lookup's ``ipmeta``;
never ``loader.pipeline``, ``loader.export``, ``loader.planning`` or ``loader.feeds``.
"""
