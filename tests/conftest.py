"""Fixtures shared by every test folder."""

from __future__ import annotations

import os

# Powertools would print an EMF metrics blob per request and a log line per
# invocation; tests read responses, not CloudWatch.
os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
os.environ.setdefault("POWERTOOLS_LOG_LEVEL", "WARNING")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
