"""The caller's address, as an explicit step of `up` and `plan`: the source the
cluster's SSH rule allows. It is the one lookup here that may leave AWS (one HTTPS GET
to checkip.amazonaws.com, see aws.identity), so the commands call it by name, once,
and pass the answer on; nothing looks it up behind another call."""

from __future__ import annotations

from clusterkit.aws.identity import caller_cidr
from clusterkit.spec.model import Spec


def ssh_source_cidr(spec: Spec) -> str:
    """The spec's ``ssh.allowed_cidr``, else the caller's public address as ``<ip>/32``
    (``CLUSTERKIT_CALLER_CIDR`` overrides the lookup; UsageError when it fails)."""
    return spec.ssh.allowed_cidr or caller_cidr()
