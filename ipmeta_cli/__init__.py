"""The `ipmeta` command: local DynamoDB, the local API server, loads and lookups."""
