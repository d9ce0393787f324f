"""Client side of the sandbox: point AWS calls at the local endpoint.

Only environment variables change, the standard ones botocore reads
(``AWS_ENDPOINT_URL``, credentials, region), plus ``CLUSTERKIT_SANDBOX=1`` (the
net guard), ``CLUSTERKIT_ADDRESS_MAP`` (the address hook's map) and
``CLUSTERKIT_CALLER_CIDR`` (the SSH source rule, instead of asking the internet), and
for a timed sandbox ``CLUSTERKIT_TIME_SCALE`` (clusterkit's polls keep pace with its
scaled waits: ``clusterkit.timescale``)."""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from clusterkit.netguard import SANDBOX_ENV, check_url
from clusterkit.sandbox.control import require_running
from clusterkit.sandbox.state import (
    ADDRESS_MAP_ENV,
    ADDRESSES_FILE,
    DIR_ENV,
    TIMINGS_FILE,
    read_json,
    state_dir,
)
from clusterkit.sandbox.timings import Timings
from clusterkit.timescale import TIME_SCALE_ENV

DEFAULT_REGION = "us-east-1"


def sandbox_env(directory: str | None = None) -> dict[str, str]:
    """The variables that make any AWS SDK / clusterkit process use the sandbox."""
    state = require_running(directory)
    where = state_dir(directory)
    check_url(state["endpoint"], purpose="sandbox endpoint")
    timings = Timings.from_json(read_json(where / TIMINGS_FILE, None))
    scale = {TIME_SCALE_ENV: str(timings.scale)} if timings.on else {}
    return {**scale,
        "AWS_ENDPOINT_URL": state["endpoint"],
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_EC2_METADATA_DISABLED": "true",  # never probe 169.254.169.254 for credentials
        "CLUSTERKIT_CALLER_CIDR": "127.0.0.1/32",  # the nodes' SSH rule: no public-IP lookup
        SANDBOX_ENV: "1",
        ADDRESS_MAP_ENV: str(where / ADDRESSES_FILE),
        DIR_ENV: str(where),
    }


def apply(env: MutableMapping[str, str], directory: str | None = None) -> dict[str, str]:
    """Set the sandbox variables in ``env``; a region only if none is set.
    Profiles are dropped: throwaway credentials must win over real ones."""
    values = sandbox_env(directory)
    env[SANDBOX_ENV] = "1"  # guard on before anything else can connect
    env.update(values)
    if TIME_SCALE_ENV not in values:
        env.pop(TIME_SCALE_ENV, None)  # an untimed sandbox: AWS's pace
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        env.pop(name, None)
    if not env.get("AWS_REGION") and not env.get("AWS_DEFAULT_REGION"):
        env["AWS_DEFAULT_REGION"] = DEFAULT_REGION
    return values


def enter_sandbox_mode() -> str:
    """Set AWS_ENDPOINT_URL and throwaway credentials for the running sandbox; the
    endpoint (the CLI says so on every run)."""
    os.environ[SANDBOX_ENV] = "1"
    return apply(os.environ)["AWS_ENDPOINT_URL"]
