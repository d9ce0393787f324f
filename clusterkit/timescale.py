"""How fast the AWS this process talks to runs: 1 on AWS. A timed sandbox (`clusterkit
sandbox start --timings aws:S`) takes S times AWS's time for every wait and says so in
``CLUSTERKIT_TIME_SCALE``, honoured in sandbox mode only (``CLUSTERKIT_SANDBOX=1``).
clusterkit's poll intervals are scaled by it, so a run in the timed sandbox is the run
it would be on AWS, its waits and its polls alike at S of the time: a 2 s poll beside a
6 s (60 s on AWS) wait would otherwise weigh ten times what it weighs on AWS."""

from __future__ import annotations

import os
from collections.abc import Mapping

from clusterkit.netguard import SANDBOX_ENV

TIME_SCALE_ENV = "CLUSTERKIT_TIME_SCALE"


def time_scale(env: Mapping[str, str] | None = None) -> float:
    """The scale in force: in (0, 1], 1 outside a timed sandbox or for a value that is
    not a number in that range."""
    env = os.environ if env is None else env
    if env.get(SANDBOX_ENV) != "1":
        return 1.0
    try:
        value = float(env.get(TIME_SCALE_ENV, "1"))
    except ValueError:
        return 1.0
    return value if 0 < value <= 1 else 1.0
