"""Autostop, the client's side of it: how each instance must behave when its OS shuts
down, which instances need changing, and what `status` says of an idle clock or of a
cluster that autostopped. PURE.

EC2 decides what an instance-initiated shutdown does (``InstanceInitiatedShutdownBehavior``:
stop, EC2's default, or terminate); a one-time spot instance always terminates. The
behaviour clusterkit gave an instance is kept in its ``clusterkit:on-shutdown`` tag, so a
repeated `up` knows it from the nodes it reads anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.kinds import InstanceState, Market
from clusterkit.node.autostop_policy import format_duration
from clusterkit.plan.nodes import Node
from clusterkit.plan.spend import EBS_GB_MONTH, HOURS_PER_MONTH

SHUTDOWN_TAG = "clusterkit:on-shutdown"
EC2_DEFAULT = "stop"  # what an instance does on an OS shutdown when nothing was set
# EC2's state reason of an instance whose OS shut it down
OS_SHUTDOWN_CODE = "Client.InstanceInitiatedShutdown"


def behaviour_for(market: Market | str, action: str) -> str:
    """The InstanceInitiatedShutdownBehavior a node of ``market`` gets for ``action``: a
    one-time spot instance can only terminate."""
    return "terminate" if market == Market.SPOT else action


def current_behaviour(node: Node) -> str:
    """What the node does on an OS shutdown: its tag, else EC2's default."""
    if node.market == Market.SPOT:
        return "terminate"
    return node.tags.get(SHUTDOWN_TAG) or EC2_DEFAULT


def to_change(nodes: Sequence[Node], action: str) -> list[str]:
    """The instances whose shutdown behaviour differs from what ``action`` needs (spot
    nodes never: they terminate already, and cannot be made to stop)."""
    return [n.instance_id for n in nodes
            if n.live and n.state != InstanceState.SHUTTING_DOWN
            and current_behaviour(n) != behaviour_for(n.market, action)]


# -- what `status` says -------------------------------------------------------------------

@dataclass(frozen=True)
class Clock:
    """The master watchdog's clock as `status` shows it (None fields: not known)."""

    running: bool  # the watchdog daemon lives
    idle_s: int | None = None
    action: str | None = None
    left_s: float | None = None  # until the cluster shuts down
    last_activity_ago_s: float | None = None
    reason: str | None = None  # the last activity seen
    deciding: bool = False  # the master has decided: the nodes are going

    def to_json(self) -> dict[str, Any]:
        return {"running": self.running, "idle_s": self.idle_s, "action": self.action,
                "left_s": self.left_s, "last_activity_ago_s": self.last_activity_ago_s,
                "reason": self.reason, "deciding": self.deciding}

    def describe(self) -> str:
        if not self.running or self.idle_s is None:
            return "autostop: off"
        setting = f"autostop: {self.action} after {format_duration(self.idle_s)} idle"
        if self.deciding:
            return f"{setting}: idle, shutting down now"
        ago = format_duration(self.last_activity_ago_s or 0)
        return (f"{setting}: {format_duration(self.left_s or 0)} left (last activity "
                f"{ago} ago: {self.reason})")


def clock_of(answer: Mapping[str, Any] | None) -> Clock | None:
    """The master's ``watchdog.py status`` answer (decoded) as a Clock; None when the
    answer is not one, no watchdog was ever installed (``installed`` false) or it was
    turned off."""
    if not isinstance(answer, Mapping) or answer.get("installed") is False:
        return None
    state = answer.get("state")
    now = answer.get("now")
    running = answer.get("running") is True
    if not isinstance(state, Mapping) or not isinstance(now, (int, float)):
        return Clock(running=True) if running else None  # turned off: no clock at all
    idle, last = state.get("idle_s"), state.get("last_activity")
    if not isinstance(idle, int) or not isinstance(last, (int, float)):
        return Clock(running=False)
    deciding = state.get("decided") is not None
    left = 0.0 if deciding else max(0.0, last + idle - now)
    return Clock(running, idle, str(state.get("action") or ""), round(left, 1),
                 round(max(0.0, now - last), 1), str(state.get("reason") or ""), deciding)


@dataclass(frozen=True)
class Volume:
    """An EBS volume of the cluster, as `status` prices what remains."""

    id: str
    size_gib: int
    type: str
    attached_to: tuple[str, ...] = ()

    @property
    def usd_per_month(self) -> float:
        return round(self.size_gib * EBS_GB_MONTH.get(self.type, EBS_GB_MONTH["gp3"]), 2)


@dataclass(frozen=True)
class Remains:
    """What a cluster whose nodes are gone or stopped still has, and what it costs."""

    autostopped: bool  # its nodes' OS shut them down (EC2's state reason says so)
    stack: str | None
    stopped: tuple[str, ...] = ()  # instances stopped (their volumes bill, compute not)
    terminated: tuple[str, ...] = ()  # instances terminated, still listed by EC2
    volumes: tuple[Volume, ...] = ()
    efs: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)  # priced

    @property
    def usd_per_month(self) -> float:
        return round(sum(v.usd_per_month for v in self.volumes)
                     + sum(float(f.get("usd_per_month", 0)) for f in self.efs), 2)

    @property
    def usd_per_hour(self) -> float:
        return round(self.usd_per_month / HOURS_PER_MONTH, 4)

    def to_json(self) -> dict[str, Any]:
        return {"autostopped": self.autostopped, "stack": self.stack,
                "stopped": list(self.stopped), "terminated": list(self.terminated),
                "volumes": [{"id": v.id, "size_gib": v.size_gib, "type": v.type,
                             "attached_to": list(v.attached_to),
                             "usd_per_month": v.usd_per_month} for v in self.volumes],
                "efs": [dict(f) for f in self.efs], "usd_per_month": self.usd_per_month}

    def lines(self, cluster: str) -> list[str]:
        """What `status` prints: what happened, what is left and costs, the commands."""
        head = (f"cluster {cluster} autostopped: its nodes shut themselves down when it "
                "was idle" if self.autostopped else f"cluster {cluster} has no running nodes")
        out = [head]
        if self.stopped:
            out.append(f"  stopped: {len(self.stopped)} instance(s), no compute charge: "
                       + ", ".join(self.stopped))
        if self.terminated:
            out.append(f"  terminated: {len(self.terminated)} instance(s): "
                       + ", ".join(self.terminated))
        out.append(f"  stack: {self.stack} (security group, launch template, IAM: no "
                   "charge)" if self.stack else "  stack: none")
        out += [f"  volume {v.id}: {v.size_gib} GiB {v.type}, ${v.usd_per_month:.2f}/month"
                for v in self.volumes]
        out += [f"  EFS {f['id']}: {f.get('size_gb', 0):.3f} GB, "
                f"${float(f.get('usd_per_month', 0)):.2f}/month" for f in self.efs]
        out.append(f"  costs now: ${self.usd_per_month:.2f}/month (storage only, us-east-1 "
                   "list prices)")
        out.append(f"  `clusterkit up SPEC` brings it back; `clusterkit down {cluster}` "
                   "removes the rest")
        return out


def autostopped(reasons: Sequence[str | None]) -> bool:
    """Whether the OS of any of the cluster's instances shut it down (the state reasons
    EC2 gives the cluster's stopped and terminated instances)."""
    return any(r == OS_SHUTDOWN_CODE for r in reasons)
