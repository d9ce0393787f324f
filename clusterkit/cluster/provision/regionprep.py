"""A region's key pair and stack for `up`'s apply: exactly what the confirmed plan says
for that region (``plan.region.RegionPlan``: its key-pair and stack actions, every
parameter, the stack as observed; the role from ``UpPlan.role``), the plan's own region
and each fallback candidate's alike, so nothing is read or decided again there."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from clusterkit.aws import keypairs, lookup
from clusterkit.cluster.provision import launch, stackops
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Stage
from clusterkit.plan.launch import base_tags
from clusterkit.plan.nodes import Node
from clusterkit.plan.provision import StackRecord, launch_outputs
from clusterkit.plan.region import RegionPlan
from clusterkit.plan.stack import StackRole, key_pair_name, stack_name
from clusterkit.plan.world import StackSeen
from clusterkit.remote.probe import local_public_key
from clusterkit.spec.model import Spec

# Launch once the stack's launch template (and what it names) is made, not when the whole
# stack is: False waits for all of it first (bench/bench_first_step.py --compare).
LAUNCH_EARLY = True


def _described(seen: StackSeen | None) -> dict[str, Any] | None:
    """stackops.deploy's ``current``: the stack as observed."""
    if seen is None:
        return None
    return {"status": seen.status, "parameters": dict(seen.parameters), "id": seen.stack_id,
            "outputs": dict(seen.outputs), "reason": ""}


def prepare_region(rt: Runtime, spec: Spec, todo: RegionPlan, role: StackRole | None,
                   timeout: float, imported: set[str],
                   ) -> tuple[StackRecord, stackops.Pending | None]:
    """Key pair and stack in ``todo.region`` as ``todo`` says; the stack's record. A stack
    it creates is returned while still in progress (with ``Pending``, to finish) once
    what a launch needs is made (``LAUNCH_EARLY``)."""
    if todo.import_key and todo.region not in imported:
        rt.started(Stage.KEY_PAIR,
                   f"importing your SSH public key as key pair {key_pair_name(spec.name)}")
        keypairs.import_key_pair(rt.session, todo.region, key_pair_name(spec.name),
                                 local_public_key(spec.ssh.identity_file), base_tags(spec))
        imported.add(todo.region)
    early = functools.partial(launch_outputs, todo.parameters) if LAUNCH_EARLY else None
    stack = stackops.deploy(rt, todo.region, stack_name(spec.name), todo.action,
                            todo.parameters, base_tags(spec), timeout=timeout,
                            current=_described(todo.current), early=early, role=role)
    if isinstance(stack, stackops.Pending):
        return StackRecord(todo.region, stack.stack_id, todo.vpc_id,
                           MappingProxyType(dict(stack.outputs))), stack
    return StackRecord.of(todo.region, stack, todo.vpc_id), None


def subnet_for(rt: Runtime, todo: RegionPlan, az: str) -> str:
    """The subnet of ``az``: as observed in the plan's region, else read now."""
    return todo.subnets.get(az) or lookup.default_subnet(rt.session, todo.region,
                                                         todo.vpc_id, az)


@dataclass
class Stacks:
    """The stack of each region `up` prepared; ``pending``: those still being created
    (their launch needs made), finished once the launch's nodes run."""

    made: dict[str, StackRecord] = field(default_factory=dict)
    pending: dict[str, stackops.Pending] = field(default_factory=dict)
    # the regions whose key pair this apply imported: a candidate walked after a failed
    # preparation there (no capacity at CreateStack) does not import it again
    imported: set[str] = field(default_factory=set)

    def prepare(self, rt: Runtime, spec: Spec, todo: RegionPlan, role: StackRole | None,
                timeout: float) -> None:
        self.made[todo.region], pending = prepare_region(rt, spec, todo, role, timeout,
                                                         self.imported)
        if pending is not None:
            self.pending[todo.region] = pending

    def finish(self, rt: Runtime, region: str, new: Sequence[Node], timeout: float,
               ) -> StackRecord:
        """The stack of ``region`` complete; if it fails, the nodes ``new`` launched on it
        are terminated (never half a cluster)."""
        pending = self.pending.pop(region, None)
        if pending is not None:
            try:
                done = stackops.finish(rt, pending, timeout=timeout)
            except ClusterkitError:
                launch.terminate_launch(rt, region, [n.instance_id for n in new])
                raise
            self.made[region] = StackRecord.of(region, done, self.made[region].vpc_id)
        return self.made[region]
