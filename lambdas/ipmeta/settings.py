"""Runtime configuration, read from the environment.

The names of the variables live here, in the runtime; ``stacks/constants.py``
re-exports them so the stack sets exactly what the code reads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_TABLE_NAME = "IPMETA_TABLE_NAME"
ENV_DYNAMODB_ENDPOINT = "IPMETA_DYNAMODB_ENDPOINT"
ENV_POINTER_CACHE_SECONDS = "IPMETA_POINTER_CACHE_SECONDS"
ENV_SOURCE_BUCKET = "IPMETA_SOURCE_BUCKET"
ENV_CHUNK_PREFIX = "IPMETA_CHUNK_PREFIX"

DEFAULT_TABLE_NAME = "ipmeta"
#: The lookup re-reads the active-version pointer at most this often per container.
DEFAULT_POINTER_CACHE_SECONDS = 5.0


@dataclass(frozen=True, slots=True)
class Settings:
    table_name: str
    dynamodb_endpoint: str | None
    pointer_cache_seconds: float

    @classmethod
    def from_environment(cls) -> Settings:
        return cls(
            table_name=os.environ.get(ENV_TABLE_NAME, DEFAULT_TABLE_NAME),
            dynamodb_endpoint=os.environ.get(ENV_DYNAMODB_ENDPOINT) or None,
            pointer_cache_seconds=float(
                os.environ.get(ENV_POINTER_CACHE_SECONDS, DEFAULT_POINTER_CACHE_SECONDS)
            ),
        )


#: CloudWatch namespace of the metrics the lookup and the loader publish.
METRICS_NAMESPACE = "ipmeta"
#: Published (value 1) by the loader each time a version is activated; the
#: data-age alarm fires when none arrived within the allowed age.
METRIC_DATASET_ACTIVATED = "DatasetActivated"
