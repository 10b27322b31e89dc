"""The CDK app's constructs: one stack for home, one per replica region, built by role.

At the top, what every part shares, and the stacks that assemble the parts:

- ``constants``: construct ids, output names, env var names (the tests import them too);
- ``config``: the deployment's options, read from CDK context (``IpmetaConfig``);
- ``nag``: cdk-nag acknowledgements; ``function``: the Python Lambda construct; ``table``: the table;
- ``ipmeta_stack`` (home's stack), ``lookup_region_stack`` (a replica region's) and
  ``deployment`` (which stacks an app gets).

The sub-packages, by role, each with a docstring of what it holds:

- ``fronts``: the lookup function and the front before it (rest, http, url), and the edge;
- ``load``: the loader's functions, its state machine, and the schedules that start it;
- ``monitoring``: the dashboard and the alarms, home's and a replica region's;
- ``regions``: what replica regions add (replicas, the arrival check, one hostname).

Imports run one way (``tests/unit/test_layout.py`` holds it): the shared modules import no
sub-package; ``fronts`` and ``load`` import only the shared modules; ``monitoring`` and
``regions`` import those and ``fronts``; the stacks import anything. The runtime
(``lambdas/``, ``loader/``) never imports ``stacks``.
"""
