"""`clusterkit autostop NAME 30m|off`, the autostop stage of `up`, and what `status`
shows of it: every node's watchdog installed (or removed) over SSH, master first in the
list but all at once; the instances' shutdown behaviour set to the action first, so an
idle node that shuts down stops or terminates as asked."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterkit.autostop import files
from clusterkit.aws import instances
from clusterkit.cluster.access.remote_ops import spec_login
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, GroupError, UsageError
from clusterkit.events import Stage
from clusterkit.kinds import InstanceState
from clusterkit.node import autostop_policy as policy
from clusterkit.plan.autostop import (
    SHUTDOWN_TAG,
    Clock,
    Remains,
    Volume,
    autostopped,
    behaviour_for,
    clock_of,
    to_change,
)
from clusterkit.plan.nodes import Node
from clusterkit.remote import selection
from clusterkit.remote.address import ssh_address, targets
from clusterkit.remote.archive import tar_bytes
from clusterkit.remote.channels import Call, run_calls
from clusterkit.remote.connect import Login, Target
from clusterkit.spec.model import Autostop, Spec
from clusterkit.statedir import cluster_dir, ensure_cluster_dir, write_private

OFF = Autostop(None)
# A node in these runs no watchdog and will not (autostopped: stopped, or going)
DOWN = (InstanceState.STOPPING, InstanceState.STOPPED, InstanceState.SHUTTING_DOWN)
MEMORY_FILE = "autostop.json"  # in the cluster's local state dir


@dataclass(frozen=True)
class AutostopResult:
    """What was set on each node (label -> started, unchanged, off, was off), the
    instances whose shutdown behaviour changed, and the master's clock after it; or,
    where no node runs (``remains``: an autostopped cluster), nothing done."""

    cluster: str
    region: str
    setting: Autostop
    nodes: dict[str, str] = field(default_factory=dict)
    behaviour_changed: tuple[str, ...] = ()
    clock: Clock | None = None
    remains: Remains | None = None  # no node runs: what the cluster still has
    spec: str = "SPEC"  # how `up` names the cluster's spec in the lines said

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "region": self.region,
                "idle_s": self.setting.idle_s, "action": self.setting.action,
                "nodes": self.nodes, "behaviour_changed": list(self.behaviour_changed),
                "clock": self.clock.to_json() if self.clock else None,
                "remains": self.remains.to_json() if self.remains else None}

    def idle_lines(self) -> list[str]:
        """`off` where no node runs: what the cluster is, what `off` means for it."""
        assert self.remains is not None
        return [self.remains.lines(self.cluster)[0],
                "autostop off: no node runs, so no watchdog runs: nothing to turn off, "
                "nothing was changed",
                f"to bring it back without autostop: `clusterkit up {self.spec} --autostop "
                "off` (a plain `up` sets autostop up again: the spec's, else the one it had)"]

    def describe(self) -> str:
        if not self.setting.on:
            return f"autostop of {self.cluster}: off on {len(self.nodes)} node(s)"
        assert self.setting.idle_s is not None
        return (f"autostop of {self.cluster}: {self.setting.action} after "
                f"{policy.format_duration(self.setting.idle_s)} idle, on "
                f"{len(self.nodes)} node(s)")


def parse_setting(duration: str, action: str | None, default_action: str = "terminate",
                  ) -> Autostop:
    """``30m`` / ``off`` and ``--action`` as a setting; UsageError (exit 2) otherwise."""
    if action is not None and action not in policy.ACTIONS:
        raise UsageError(f"--action {action!r} is not terminate or stop",
                         "--action terminate (the default) or --action stop")
    if duration.strip().lower() == "off":
        return Autostop(None, action or default_action)
    try:
        return Autostop(policy.parse_duration(duration), action or default_action)
    except ValueError as exc:
        raise UsageError(str(exc), "e.g. `clusterkit autostop NAME 30m`, or `off`") from None


def _running(nodes: Sequence[Node]) -> list[Node]:
    return selection.ordered([n for n in nodes if n.state == InstanceState.RUNNING])


def sync_behaviour(rt: Runtime, region: str, nodes: Sequence[Node], action: str) -> list[str]:
    """Give every node whose shutdown behaviour differs the one ``action`` needs
    (ModifyInstanceAttribute each, then one CreateTags per behaviour); the ids changed.
    Nothing is called when every node matches (a repeated `up`)."""
    changed = to_change(nodes, action)
    by_id = {n.instance_id: n for n in nodes}
    groups: dict[str, list[str]] = {}
    for iid in changed:
        behaviour = behaviour_for(by_id[iid].market, action)
        instances.set_shutdown_behavior(rt.session, region, iid, behaviour)
        groups.setdefault(behaviour, []).append(iid)
    for behaviour, ids in groups.items():
        instances.create_tags(rt.session, region, ids, {SHUTDOWN_TAG: behaviour})
    return changed


def _configs(cluster: str, nodes: Sequence[Node], setting: Autostop) -> dict[str, policy.Config]:
    """Each running node's config (instance id -> Config), one token for them all."""
    assert setting.idle_s is not None
    master = nodes[0]
    token = files.new_token()
    return {n.instance_id: policy.Config(
        cluster=cluster, node=n.index or 0, nodes=len(nodes),
        master=ssh_address(master, via_gateway=True), idle_s=setting.idle_s,
        action=setting.action, token=token) for n in nodes}


def _calls(dial: Sequence[Target], configs: dict[str, policy.Config] | None) -> dict[str, Call]:
    if configs is None:
        return {t.hop.label: Call(files.off_command()) for t in dial}
    return {t.hop.label: Call(files.install_command(),
                              tar_bytes(files.entries(configs[t.node.instance_id])))
            for t in dial}


def _outcome(answer: dict | None, on: bool) -> str:
    if answer is None:
        return "unknown"
    if not on:
        return "off" if answer.get("was_on") else "was off"
    return "started" if answer.get("changed") else "unchanged"


def apply(rt: Runtime, cluster: str, region: str, login: Login, nodes: Sequence[Node],
          setting: Autostop) -> AutostopResult:
    """``setting`` on every running node of ``nodes`` (the master must run): shutdown
    behaviour first, then each node's watchdog (off: removed). Raises a ClusterkitError
    naming the nodes where it failed."""
    running = _running(nodes)
    if not running or running[0].index != 0:
        raise ClusterkitError(f"cluster {cluster} has no running master",
                              f"`clusterkit up` brings it back; then `clusterkit autostop "
                              f"{cluster} ...`")
    changed = sync_behaviour(rt, region, running, setting.action) if setting.on else []
    configs = _configs(cluster, running, setting) if setting.on else None
    dial = targets(running, running)
    rt.started(Stage.AUTOSTOP, f"autostop on {len(dial)} node(s): " + (
        f"{setting.action} after {policy.format_duration(setting.idle_s or 0)} idle"
        if setting.on else "off"))
    try:
        group = run_calls(login, dial, _calls(dial, configs), timeout=60)
    except GroupError as exc:
        raise ClusterkitError(f"autostop could not be set on every node: {exc}",
                              f"run `clusterkit autostop {cluster} ...` again") from exc
    short = {t.hop.label: "master" if t.node.index == 0 else f"worker-{t.node.index}"
             for t in dial}
    done = {short[label]: _outcome(files.last_json(r.stdout), setting.on)
            for label, r in group.items()}
    remember(cluster, setting)
    clock = read_clock(login, running)
    rt.done(Stage.AUTOSTOP, clock.describe() if clock else "autostop: off")
    return AutostopResult(cluster, region, setting, done, tuple(changed), clock)


def _memory(cluster: str) -> Path:
    return cluster_dir(cluster) / MEMORY_FILE


def remember(cluster: str, setting: Autostop) -> None:
    """The setting last applied, kept on this machine: `up` applies it again to nodes
    that come back without a watchdog (after a terminate) when the spec names none."""
    ensure_cluster_dir(cluster)
    write_private(_memory(cluster), json.dumps({"idle_s": setting.idle_s,
                                                "action": setting.action}) + "\n")


def remembered(cluster: str) -> Autostop | None:
    try:
        data = json.loads(_memory(cluster).read_text())
        return Autostop(data["idle_s"], str(data["action"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def read_clock(login: Login, nodes: Sequence[Node]) -> Clock | None:
    """The master watchdog's clock (None: never installed, or the master cannot be
    read: `status` answers without it)."""
    running = _running(nodes)
    if not running or running[0].index != 0:
        return None
    dial = targets(running, running[:1])
    try:
        group = run_calls(login, dial, {dial[0].hop.label: Call(files.status_command())},
                          timeout=20, warn=True)
    except ClusterkitError:
        return None
    result = next(iter(group.values()), None)
    if result is None or result.error is not None or result.exit_code != 0:
        return None
    return clock_of(files.last_json(result.stdout))


def current(login: Login, nodes: Sequence[Node]) -> Autostop | None:
    """The setting the cluster's master runs now (None: none runs)."""
    clock = read_clock(login, nodes)
    if clock is None or not clock.running or clock.idle_s is None:
        return None
    return Autostop(clock.idle_s, clock.action or "terminate")


def up_stage(rt: Runtime, spec: Spec, region: str, nodes: Sequence[Node],
             fresh: bool = True) -> AutostopResult | None:
    """`up`'s last stage, once every node is bootstrapped: the spec's setting (or `up
    --autostop`'s, put in the spec); without one, the setting the master runs, else the
    one last applied from this machine, on every node (new ones too). ``fresh``: `up`
    launched or started nodes; without, and without a setting in the spec, the master is
    not asked (no connection more than the bootstrap's): the one last applied from this
    machine is, or nothing. None: nothing to do."""
    login = spec_login(spec)
    setting = spec.autostop
    if setting is None and not fresh:
        kept = remembered(spec.name)
        if kept is None or not kept.on:  # nothing set from here: what runs stays as it is
            return None
        return apply(rt, spec.name, region, login, nodes, kept)
    if setting is None or not setting.on:
        running = current(login, nodes)  # one read of the master
        if setting is None:
            setting = running or remembered(spec.name)
        elif running is None:  # off, and off it is
            return None
    if setting is None:
        return None
    return apply(rt, spec.name, region, login, nodes, setting)


def do_autostop(target: str, duration: str, *, action: str | None = None,
                region: str | None = None, profile: str | None = None,
                rt: Runtime | None = None) -> AutostopResult:
    """`clusterkit autostop NAME 30m|off`: the setting on every node of the running
    cluster. A bad duration or action exits 2 before any call; without ``action``, the
    spec's, else the one the master runs, else terminate."""
    from clusterkit.cluster.access import hostkeys
    from clusterkit.cluster.access.remote_ops import login_for, require_running
    from clusterkit.cluster.access.target import find_nodes, open_cluster

    ref = open_cluster(target, region)
    spec_action = ref.spec.autostop.action if ref.spec and ref.spec.autostop else None
    setting = parse_setting(duration, action, spec_action or "terminate")
    rt = rt or Runtime.make(region=region, profile=profile)
    login, regions = login_for(target, region)
    found = [n for n in find_nodes(rt, login.cluster, regions)[1] if n.standby_for is None]
    if all(n.state in DOWN for n in found):  # autostopped: status finds it, and so do we
        return _none_running(rt, login.cluster, setting, found, regions,
                             ref.spec.file if ref.spec else "SPEC")
    require_running(found, found)
    hostkeys.prepare(rt, login.cluster, found, (), port=login.port)
    if action is None and spec_action is None and setting.on:
        now = current(login, found)
        setting = Autostop(setting.idle_s, now.action if now else setting.action)
    return apply(rt, login.cluster, found[0].region, login, found, setting)


def _none_running(rt: Runtime, cluster: str, setting: Autostop, found: Sequence[Node],
                  regions: Sequence[str], spec: str) -> AutostopResult:
    """`autostop` of a cluster none of whose nodes runs (``found``: stopped or going):
    `off` has nothing to do and says what it means; a duration has no node to go on
    (exit 1, how to bring the cluster back with it); none at all: no cluster (exit 1)."""
    from clusterkit.cluster.access.target import search_regions

    where = sorted({n.region for n in found}) or search_regions(rt, regions)
    left = remains(rt, cluster, where)
    if left is None:
        raise ClusterkitError(f"no cluster {cluster} in {', '.join(where)}",
                              "check the name and --region (or give the spec file); "
                              "`clusterkit status` lists clusters")
    if setting.on:
        raise ClusterkitError(
            f"{left.lines(cluster)[0]}: no node runs to set autostop on",
            f"bring it back with it: `clusterkit up {spec} --autostop "
            f"{policy.format_duration(setting.idle_s or 0)}`")
    return AutostopResult(cluster, where[0], setting, remains=left, spec=spec)


def remains(rt: Runtime, cluster: str, regions: Sequence[str]) -> Remains | None:
    """What the cluster still has where none of its nodes runs (`status` of a cluster
    that autostopped): its stack, stopped or terminated instances, volumes and file
    systems, priced; None when neither its stack nor a stopped instance is left in
    ``regions``."""
    from clusterkit.aws import stack as cfn
    from clusterkit.aws import teardown, volumes
    from clusterkit.cluster.access.target import per_region
    from clusterkit.plan.down import KeptEfs
    from clusterkit.plan.stack import stack_name

    def one(region: str) -> Remains | None:
        s = rt.session
        stack = cfn.describe_stack(s, region, stack_name(cluster))
        gone = instances.ended(s, region, cluster)
        vols = tuple(Volume(v["id"], int(v.get("size_gib") or 0), str(v.get("type") or ""),
                            tuple(v["attached_to"]))
                     for v in volumes.cluster_volumes(s, region, cluster))
        efs = tuple(KeptEfs(f["id"], region, f.get("size_bytes", 0), f.get("created", ""))
                    .priced() for f in teardown.file_systems(s, region, cluster))
        stopped = any(st in ("stopping", "stopped") for st, _r in gone.values())
        if not (stack or stopped):  # after `down` (a kept EFS at most): no cluster any more
            return None
        return Remains(
            autostopped([r for _state, r in gone.values()]),
            stack_name(cluster) if stack else None,
            tuple(i for i, (st, _r) in gone.items() if st in ("stopping", "stopped")),
            tuple(i for i, (st, _r) in gone.items() if st in ("shutting-down", "terminated")),
            vols, efs)

    found = [r for r in per_region(list(regions), one).values() if r is not None]
    return found[0] if found else None
