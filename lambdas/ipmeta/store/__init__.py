"""The lookup's data access: ``dynamodb``, the only module of the package that imports boto3.

It only reads (the loader's ``loader.store`` writes) and speaks the key schema
of ``ipmeta.schema.keys``.

Imports: ``ipmeta.schema`` and ``ipmeta.lookup.covers`` (the cover index it fills); never
``ipmeta.shapes`` or ``ipmeta.api``.
"""
