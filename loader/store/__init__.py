"""The loader's data access: the only loader code that calls boto3 (``table``, ``s3``, ``events``).

- ``table``: ``LoaderTable``, every DynamoDB write and the reads only the loader makes;
- ``s3``: the source bucket, its staging prefix (``S3Staging``), downloads and uploads;
- ``events``: the ``DatasetActivated`` change event (EventBridge, or a log line locally);
- ``staging``: the staging area between states (a folder locally, a prefix in AWS);
- ``source``: a load's files, local or ``s3://``, made local for the readers.

May import the shared modules of ``loader`` and the lookup's ``ipmeta``;
never ``loader.pipeline``, ``loader.export`` or ``loader.planning``.
"""
