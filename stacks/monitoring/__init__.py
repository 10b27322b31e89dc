"""The dashboard and the alarms, through cdk-monitoring-constructs.

- ``dashboard``: home's dashboard and alarms, sent to one SNS topic (``Monitoring``);
- ``dashboard_metrics``: the custom metrics the dashboard draws (the loader's, the lookup's);
- ``region_alarms``: a replica region's alarms, on a topic of its own.

It may import the shared modules of ``stacks`` and ``fronts`` (a front's metrics), never
``load`` or ``regions``.
"""
