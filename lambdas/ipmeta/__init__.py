"""ipmeta core: IP parsing, the key schema, and DynamoDB data access.

Shipped to Lambda as part of the `lambdas/` asset and imported by the loader,
the local CLI, the CDK stack (key attribute names) and the tests.
"""
