"""What the default stack costs a month before any lookup or load: its fixed bill, line by line.

List prices in us-east-1, as ``costs`` and ``regions`` use. The counts are the default stack's
(``cdk.json`` as it is): ``tests/infra/test_fixed_bill.py`` counts each one in its synthesized
template, so a change to the stack that adds an alarm metric, a key or a secret fails there
until this bill says so. ``ipmeta plan`` prints it.

- **Alarms**: billed per metric an alarm reads (a sum of three metrics is three).
- **Custom metrics**: the lookup's metrics bill only in the hours a container publishes them,
  so an idle stack pays nothing for them; they are the one line that grows with traffic, up to
  ``costs.metrics_month_costs``. The loader's publish per load, a few cents.
- **The dashboard**: none by default; ``dashboard=true`` builds one (``ipmeta plan --dashboard``
  counts it; docs/decisions.md, "The dashboard is an option").
- **The alarm topic's key** (``alarmTopicEncryption``), **the secrets** (the front's keys and the
  page-token key), and the table's **storage** and **backups** (point-in-time recovery) of the
  data it holds.

Every line is at list price: CloudWatch's free tier (an account's first 10 alarm metrics and
three dashboards of up to 50 metrics) is the account's, shared with whatever else runs there,
and the dashboard draws more than 50 metrics.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Final

from loader.planning.costs import LOOKUP_METRICS_COUNT, METRIC_PRICE_PER_MONTH, STORAGE_PRICE_PER_GB_MONTH
from loader.planning.regions import (
    ALARM_METRIC_PER_MONTH,
    PITR_PRICE_PER_GB_MONTH,
    SECRET_PER_MONTH,
    TOPIC_KEY_PER_MONTH,
)
from loader.planning.write_model import GB

#: A CloudWatch dashboard, beyond an account's first three.
DASHBOARD_PER_MONTH: Final = 3.00
#: The data ``make run`` serves, as a deployment would store it (docs/deploy.md, "What a month
#: costs"): the ASN dataset's items and their mean size.
DEMO_ITEMS: Final = 516_000
DEMO_ITEM_BYTES: Final = 250
#: The monthly target for the default stack in one region, before traffic and reloads (issue 34).
TARGET_USD_PER_MONTH: Final = 3.00


@dataclass(frozen=True)
class FixedResources:
    """What a stack holds that bills by the month, whatever it serves."""

    alarm_metrics: int
    dashboards: int
    keys: int
    secrets: int

    def with_dashboard(self) -> FixedResources:
        """The same stack deployed with ``dashboard=true``: one dashboard more."""
        return dataclasses.replace(self, dashboards=self.dashboards + 1)


#: The default stack: five alarms on nine metrics (``stacks/monitoring/alarm_table.py``: the front's
#: 5xx, the lookup's throttles, three read operations' throttles, three execution outcomes, the
#: default dataset's age), no dashboard (``dashboard`` is off), the alarm topic's key, the HTTP
#: API's keys and the page-token key.
DEFAULT_STACK: Final = FixedResources(alarm_metrics=9, dashboards=0, keys=1, secrets=2)


def fixed_bill(
    resources: FixedResources = DEFAULT_STACK, stored_gb: float = DEMO_ITEMS * DEMO_ITEM_BYTES / GB
) -> dict[str, Any]:
    """The fixed monthly bill of ``resources`` holding ``stored_gb`` of data: each line and the total."""
    lines = {
        "alarms": resources.alarm_metrics * ALARM_METRIC_PER_MONTH,
        "custom_metrics": 0.0,
        "dashboard": resources.dashboards * DASHBOARD_PER_MONTH,
        "keys": resources.keys * TOPIC_KEY_PER_MONTH,
        "secrets": resources.secrets * SECRET_PER_MONTH,
        "storage": stored_gb * STORAGE_PRICE_PER_GB_MONTH,
        "backups": stored_gb * PITR_PRICE_PER_GB_MONTH,
    }
    total = sum(lines.values())
    return {
        "resources": {
            "alarm_metrics": resources.alarm_metrics,
            "dashboards": resources.dashboards,
            "keys": resources.keys,
            "secrets": resources.secrets,
            "stored_gb": round(stored_gb, 3),
        },
        "breakdown": {line: round(usd, 2) for line, usd in lines.items()},
        "usd_per_month": round(total, 2),
        #: The lookup's metrics, which bill only in hours with lookups: at most this, every hour busy.
        "custom_metrics_with_traffic_usd": round(LOOKUP_METRICS_COUNT * METRIC_PRICE_PER_MONTH, 2),
        "target_usd_per_month": TARGET_USD_PER_MONTH,
    }
