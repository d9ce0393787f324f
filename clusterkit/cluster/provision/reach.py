"""`up`'s wait for SSH on every node (progress as each answers, a node reclaimed meanwhile
aborting the launch), the host keys recorded under both addresses a node is dialled
at, and the cluster's entries for the user's own ssh (``ssh NAME``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from clusterkit.cluster.provision import launch
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import CapacityError
from clusterkit.events import Kind, Stage
from clusterkit.plan.nodes import Node
from clusterkit.remote import known_hosts, sshhosts
from clusterkit.remote.address import address_or_none
from clusterkit.remote.connect import Login
from clusterkit.remote.probe import wait_reachable
from clusterkit.spec.model import Spec


def _elapsed(seconds: float) -> str:
    seconds = int(max(0.0, seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


class _SshProgress:
    """Progress of the SSH wait: each node as it answers, and k/N ready with the elapsed
    time at the first round and then every ``every`` seconds."""

    def __init__(self, rt: Runtime, total: int, every: float = 10.0) -> None:
        self.rt, self.total, self.every = rt, total, every
        self.start = rt.clock()
        self.ready = 0
        self.last: float | None = None

    def on_ready(self, iid: str, address: str) -> None:
        self.ready += 1
        self.rt.emit(Kind.PROGRESS, f"{iid} reachable at {address} ({self.ready}/{self.total} "
                     f"ready, {_elapsed(self.rt.clock() - self.start)})", stage=Stage.SSH,
                     node=iid, done=self.ready, total=self.total, level=1)

    def on_round(self, ready: int, total: int) -> None:
        now = self.rt.clock()
        if self.last is None or now - self.last >= self.every:
            self.last = now
            self.rt.emit(Kind.PROGRESS, f"waiting for SSH: {ready}/{total} ready, "
                         f"{_elapsed(now - self.start)} elapsed", stage=Stage.SSH,
                         done=ready, total=total, level=1)


def wait_for_ssh(rt: Runtime, spec: Spec, region: str, running: Sequence[Node],
              new: Sequence[Node], deadline: float,
              pinned: Mapping[str, str]) -> dict[str, str]:
    """SSH on every node until the deadline (nodes with a ``pinned`` key: banner only);
    a node terminated meanwhile (spot reclaim) aborts at once, and the nodes of this
    launch are terminated (never half a cluster)."""
    rt.started(Stage.SSH, f"waiting for SSH on {len(running)} node(s)")
    ids = [n.instance_id for n in running]
    progress = _SshProgress(rt, len(running))
    try:
        return wait_reachable(
            running, port=spec.ssh.port, deadline=deadline,
            on_ready=progress.on_ready, on_round=progress.on_round, clock=rt.clock,
            interval=rt.poll, check=lambda: launch.check_alive(rt, region, ids),
            pinned=pinned)
    except CapacityError:
        launch.terminate_launch(rt, region, [n.instance_id for n in new])
        raise


def record_host_keys(spec: Spec, nodes: Sequence[Node],
                     host_keys: dict[str, str]) -> Path | None:
    """Write the probed host keys to the cluster's known_hosts, under the address you dial
    and the one the master dials (`clusterkit ssh`/`exec` reach workers through it); the
    file, or None when no key was probed."""
    keys = {addr: host_keys[n.instance_id] for n in nodes for via in (False, True)
            if (addr := address_or_none(n, via_gateway=via)) and host_keys.get(n.instance_id)}
    return known_hosts.record(spec.name, keys, spec.ssh.port) if keys else None


def write_ssh_hosts(spec: Spec, nodes: Sequence[Node]) -> Path | None:
    """The cluster's entries for the user's own ssh (``remote.sshhosts``): ``NAME`` for
    the master, ``NAME-worker-N`` through it; written once its known_hosts holds the
    nodes' keys (None: no key recorded, or a node without an address)."""
    if not known_hosts.known_hosts_path(spec.name).exists():
        return None
    ordered = sorted((n for n in nodes if n.index is not None), key=lambda n: n.index or 0)
    master = address_or_none(ordered[0]) if ordered and ordered[0].index == 0 else None
    workers = [(n.index or 0, address_or_none(n, via_gateway=True)) for n in ordered[1:]]
    if master is None or any(address is None for _, address in workers):
        return None
    login = Login(spec.name, user=spec.ssh.user, port=spec.ssh.port,
                  identity_file=spec.ssh.identity_file)
    return sshhosts.write(login, sshhosts.entries(spec.name, master, [
        (index, address) for index, address in workers if address is not None]))
