"""CORS, the same on every front: what a browser on a configured origin may send and read.

The function answers with these (``ipmeta.api.app.cors_config``), and the stacks give each
front's own CORS the same values (REST's preflight, the HTTP API's and the function URL's CORS
configuration), so a preflight API Gateway answers and a response the function sends agree. The
origins are the deployment's (``corsAllowOrigins``, ``ENV_CORS_ORIGINS``); none: no CORS at all.
"""

from __future__ import annotations

from typing import Final

from ipmeta.api.fronts.credentials import API_KEY_HEADER, AUTHORIZATION_HEADER

#: What a preflight allows (POST: the batch routes). A browser sends no API key on a preflight.
CORS_ALLOW_METHODS: Final = ("GET", "POST", "OPTIONS")
#: The key forms' headers, a batch's JSON body, and the revalidation of a cached answer.
CORS_ALLOW_HEADERS: Final = ("Content-Type", "If-None-Match", API_KEY_HEADER, AUTHORIZATION_HEADER)
#: An HTTP API with CORS replaces the function's CORS headers with its own, so it names ETag too.
CORS_EXPOSE_HEADERS: Final = ("ETag",)
CORS_MAX_AGE_SECONDS: Final = 3600
