"""What `up` refuses before it changes anything: a spec that differs from the running
nodes in a way it cannot apply, and a cluster another `up` or `down` is changing."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.errors import ClusterBusyError, UsageError
from clusterkit.plan.drift import refused, spec_drift
from clusterkit.plan.nodes import Node
from clusterkit.plan.world import Observed
from clusterkit.spec.model import Spec


def refuse_drift(spec: Spec, region: str | None, nodes: Sequence[Node]) -> None:
    """UsageError (exit 2) with the whole diff when the spec differs from what runs in
    a way `up` cannot apply to running nodes; checked before any other call."""
    diffs = spec_drift(spec, nodes)
    if refused(diffs):
        raise UsageError(
            f"the spec of cluster {spec.name} differs from what runs in a way `up` cannot "
            "apply to running nodes:\n" + "\n".join(f"  {d.describe()}" for d in diffs),
            f"`clusterkit down {spec.name} --region {region}` first, then `clusterkit up` "
            "with the new spec (or put the running values back in the spec)")


def refuse_busy(spec: Spec, observed: Observed) -> None:
    """ClusterBusyError when the stack is in progress (still, after `up` waited for it
    once: another `up` or `down` began meanwhile)."""
    stack = observed.stack
    if stack is not None and stack.in_progress:
        raise ClusterBusyError(
            f"the stack of cluster {spec.name} in {observed.region} is {stack.status}: "
            "another `up` or `down` of it is running (on another machine, or one "
            "interrupted here)",
            f"wait until it ends (`clusterkit status {spec.name}` shows the stack's state), "
            "then run `clusterkit up` again; nothing was changed")
