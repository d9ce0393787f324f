"""`clusterkit up`: show what it will spend and ask, then stack, gang launch, wait for
SSH. Idempotent and resumable: the cluster is found by its tags, and only what differs
from the spec is changed; a difference it cannot apply to running nodes is refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clusterkit.aws import instances
from clusterkit.bootstrap.run import BootstrapResult
from clusterkit.catalog.ranking import Offer
from clusterkit.cluster.access import hostkeys, nodecache, record
from clusterkit.cluster.dataset.checks import view_for_up
from clusterkit.cluster.ops import uprecord
from clusterkit.cluster.ops.autostop import AutostopResult, parse_setting, up_stage
from clusterkit.cluster.provision import (
    efsaccess,
    launch,
    profiles,
    reserved,
    savedplan,
    stackops,
    stopped,
)
from clusterkit.cluster.provision.bootstrap import bootstrap_nodes, check_steps
from clusterkit.cluster.provision.locks import cluster_lock
from clusterkit.cluster.provision.reach import record_host_keys, wait_for_ssh, write_ssh_hosts
from clusterkit.cluster.provision.refusals import refuse_busy, refuse_drift
from clusterkit.cluster.provision.regionprep import Stacks, subnet_for
from clusterkit.cluster.provision.running import Trail, report_failure
from clusterkit.cluster.provision.savedplan import SavedPlan
from clusterkit.cluster.provision.survey import recheck, survey_up
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import (
    ClusterBusyError,
    ClusterkitError,
    UsageError,
)
from clusterkit.events import Kind, Stage
from clusterkit.kinds import InstanceState
from clusterkit.plan.cost import cluster_hourly
from clusterkit.plan.nodes import Node, launched_retag, node_order
from clusterkit.plan.provision import ProvisionRecord
from clusterkit.plan.region import RegionPlan
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.stack import stack_name
from clusterkit.plan.up import UpPlan, plan_up
from clusterkit.plan.world import Observed
from clusterkit.remote import sshhosts
from clusterkit.remote.address import address_or_none
from clusterkit.spec.model import Spec

Confirm = Callable[[str], bool]
TAG_BATCH = 1000  # resource ids per CreateTags (EC2's limit)


@dataclass(frozen=True)
class UpNode:
    """One node of the cluster `up` left running, as the result lists it."""

    index: int | None
    role: str
    instance_id: str
    type: str
    az: str
    market: str
    ssh_address: str | None
    private_ip: str | None
    host_key: str | None

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "role": self.role, "instance_id": self.instance_id,
                "type": self.type, "az": self.az, "market": self.market,
                "ssh_address": self.ssh_address, "private_ip": self.private_ip,
                "host_key": self.host_key}


@dataclass(frozen=True)
class UpResult:
    """What `up` built: the nodes in index order, the cluster's $/h, and how to reach the
    master (login user, port, the known_hosts file its host keys went to, if any)."""

    cluster: str
    region: str
    hourly_usd: float | None
    nodes: tuple[UpNode, ...]
    ssh_user: str = "ubuntu"
    ssh_port: int = 22
    known_hosts: Path | None = None
    bootstrap: BootstrapResult | None = None  # None: not bootstrapped (no SSH wait)
    autostop: AutostopResult | None = None  # None: autostop neither asked for nor running
    ssh_hosts: Path | None = None  # the entries for `ssh NAME` (remote.sshhosts)
    ssh_include: str | None = None  # the line ~/.ssh/config still needs for them

    def to_json(self) -> dict[str, Any]:
        return {"cluster": self.cluster, "region": self.region, "hourly_usd": self.hourly_usd,
                "nodes": [n.to_json() for n in self.nodes],
                "bootstrap": self.bootstrap.to_json() if self.bootstrap else None,
                "autostop": self.autostop.to_json() if self.autostop else None,
                "ssh_hosts": str(self.ssh_hosts) if self.ssh_hosts else None,
                "ssh_include": self.ssh_include}


def do_up(spec_file: str | None, *, rt: Runtime | None = None, profile: str | None = None,
          timeout: float = 1800.0, wait_ssh: bool = True, yes: bool = False,
          confirm: Confirm | None = None, region: str | None = None,
          accept_host_keys: Sequence[str] = (), bootstrap: bool = True,
          force_steps: Sequence[str] = (), plan_file: str | None = None,
          autostop: str | None = None, wait_start: bool = True) -> UpResult:
    """``yes`` skips the question; ``confirm`` asks it (None: no terminal to ask on, so
    anything that would spend money is refused unless ``yes``). ``region`` (--region)
    restricts new nodes to that one of the spec's regions, or is refused (exit 2).
    ``plan_file``: a saved plan (`plan --out`) applied as saved, instead of a spec file.
    Once SSH answers every node is bootstrapped (unless ``bootstrap`` is False);
    ``force_steps``: bootstrap steps to run again whatever their receipts say.
    ``autostop`` (`up --autostop 30m|off`) replaces the spec's (exit 2 if it is not a
    duration); it is set up on every node last. ``wait_start`` False (`up --no-wait`):
    a Capacity Block that has not started is not waited for (exit 1, its start time)."""
    from clusterkit.spec import load

    check_steps(force_steps)
    saved = None
    if plan_file is not None:
        if spec_file is not None or region is not None:
            raise UsageError("--plan applies a saved plan: it takes no SPEC and no --region "
                             "(the plan file names both)",
                             "`clusterkit up --plan FILE`, or `clusterkit up SPEC`")
        saved = savedplan.load(plan_file)
        spec, region = saved.spec(), saved.region  # exit 2 before any AWS call
    elif spec_file is None:
        raise UsageError("`up` needs a SPEC file or --plan FILE",
                         "`clusterkit up cluster.yaml` (see `clusterkit up --help`)")
    else:
        spec = load(spec_file)
    if autostop is not None:  # `up --autostop 30m|off`: as if the spec said so
        action = spec.autostop.action if spec.autostop else "terminate"
        spec = replace(spec, autostop=parse_setting(autostop, None, action))
    rt = rt or Runtime.make(region=spec.region, profile=profile)
    return up(rt, spec, timeout=timeout, wait_ssh=wait_ssh, yes=yes, confirm=confirm,
              only_region=region, accept_host_keys=accept_host_keys, bootstrap=bootstrap,
              force_steps=force_steps, saved=saved, wait_start=wait_start)


def _check_plan(rt: Runtime, plan: UpPlan, *, yes: bool, confirm: Confirm | None) -> bool:
    """Show what `up` will do and spend (plan.spend.plan_lines, exactly what `clusterkit
    plan` prints) and ask; True when a question was asked and answered yes."""
    lines = plan_lines(plan)
    if not plan.asks:
        lines = [line for line in lines[1:] if line.startswith(("differs:", "note:", "warning:"))]
    for line in lines:
        if line.lstrip().startswith("warning: "):
            rt.warn(line.lstrip().removeprefix("warning: "))
        else:
            rt.info(line)
    if not plan.asks or yes:
        return False
    if confirm is None:
        raise UsageError("`up` would create billable resources and there is no terminal to "
                         "ask on: nothing changed",
                         "pass --yes to go ahead without asking (`clusterkit plan SPEC` "
                         "shows the same without changing anything)")
    if not confirm("go ahead?"):
        raise ClusterkitError("declined: nothing changed", "`clusterkit plan SPEC` shows "
                              "what `up` would do, without changing anything")
    return True


def _retag(rt: Runtime, plan: UpPlan, region: str, new: Sequence[Node]) -> None:
    """The role tags the plan writes on the nodes it keeps (and their root volumes), then
    those a launch of several roles left ``pending`` (by the index each new node got):
    one call per role (and per 1000 resources, EC2's limit), however many nodes."""
    for group in (*plan.nodes.retag, *launched_retag(plan.cluster, new)):
        resources = group.resources
        for start in range(0, len(resources), TAG_BATCH):
            instances.create_tags(rt.session, region, resources[start:start + TAG_BATCH],
                                  group.tags)


def _region_plan(plan: UpPlan, region: str) -> RegionPlan:
    """The plan's work in ``region``; a candidate's region is always planned."""
    todo = plan.region_plan(region)
    if todo is None:
        raise ClusterkitError(f"the plan has no preparation for {region}, where a "
                              "candidate launches", "make the plan again")
    return todo


def _launch(rt: Runtime, spec: Spec, plan: UpPlan, stacks: Stacks, timeout: float,
            trail: Trail) -> tuple[str, list[Node]]:
    """Walk the confirmed candidates, in the order shown, until one has capacity; each
    candidate's region is prepared as the plan says (observed before the question)."""
    def try_launch(offer: Offer) -> list[Node]:
        trail.touch(offer.region)
        here = _region_plan(plan, offer.region)
        if offer.region not in stacks.made:
            stacks.prepare(rt, spec, here, plan.role, timeout)
        stack = stacks.made[offer.region]
        subnet = subnet_for(rt, here, offer.az or "")
        efsaccess.mount_target(rt, stack, subnet, offer.az or "",  # ready when SSH answers
                               *((plan.mount_targets, plan.lent_targets)
                                 if offer.region == plan.region else ()))
        launched = launch.launch_all(
            rt, spec, offer, plan.nodes.launch, launch_template_id=stack.launch_template_id,
            subnet_id=subnet, stack_id=stack.stack_id, placement_group=stack.placement_group,
            security_group=stack.security_group)
        trail.touch(offer.region, launched)
        return launched

    offer, new = launch.walk(rt, plan.candidates, try_launch, market_policy=spec.nodes.market)
    rt.done(Stage.LAUNCH, f"launched {len(new)} node(s): "
            f"{', '.join(n.instance_id for n in new)}")
    return offer.region, new


def _wait_new(rt: Runtime, region: str, new: Sequence[Node], deadline: float) -> list[Node]:
    """The launched nodes once they run (described: root volume ids known); a failure
    terminates them all (never half a cluster)."""
    ids = [n.instance_id for n in new]
    try:
        return launch.wait_running(rt, region, ids, deadline=deadline)
    except ClusterkitError:
        launch.terminate_launch(rt, region, ids)
        raise


def up(rt: Runtime, spec: Spec, **options: Any) -> UpResult:
    """`up` of ``spec``, one at a time per cluster on this machine (``locks``); what it
    reported, with when, is kept as the cluster's last `up` (``uprecord``)."""
    with cluster_lock(spec.name, "up"):
        recording = uprecord.Recording(rt.report)
        ok = False
        try:
            result = _up(replace(rt, report=recording), spec, **options)
            ok = True
            return result
        finally:
            if any(m.kind == Kind.STAGE_STARTED.value for m in recording.marks):
                uprecord.save(spec.name, recording, ok)  # it did something: chart it


def _up(rt: Runtime, spec: Spec, *, timeout: float = 1800.0, wait_ssh: bool = True,
        yes: bool = False, confirm: Confirm | None = None,
        only_region: str | None = None, accept_host_keys: Sequence[str] = (),
        bootstrap: bool = True, force_steps: Sequence[str] = (),
        saved: SavedPlan | None = None, wait_start: bool = True) -> UpResult:
    """Observe, plan, show and ask (a saved plan: observe again and compare instead),
    then apply exactly that plan; a Capacity Block not started yet is waited for
    (``wait_start`` False: exit 1 instead)."""
    deadline = rt.clock() + timeout
    check_steps(force_steps)

    def on_nodes(region: str | None, nodes: list[Node]) -> None:
        if region:
            rt.info(f"cluster {spec.name}: {len([n for n in nodes if n.live])} node(s) in "
                    f"{region}")
        refuse_drift(spec, region, nodes)  # before any other call

    observed = survey_up(rt, spec, only_region, on_nodes)
    if observed.stack is not None and observed.stack.in_progress:  # not ours: we hold the lock
        observed = _after_other(rt, spec, observed, timeout,
                                lambda: survey_up(rt, spec, only_region, on_nodes))
        deadline = rt.clock() + timeout
    refuse_busy(spec, observed)  # in progress again: one more began meanwhile
    if saved is not None:  # the saved plan as read back; PlanDriftError naming a change
        observed, plan = saved.to_apply(rt, spec, observed)
    else:
        plan = plan_up(spec, observed)
    reserved.refuse(plan, wait=wait_start)  # exit 2 (or 1: --no-wait) before asking
    for line in plan_lines(plan) if saved is not None else ():  # applied as saved: shown
        rt.info(line)
    asked = saved is None and _check_plan(rt, plan, yes=yes, confirm=confirm)
    if reserved.wait_for_start(rt, spec, plan):  # a block: nothing is made before its start
        deadline, asked = rt.clock() + timeout, True
    if asked:
        recheck(rt, spec, observed)  # the world may have moved while the user read
    trail = Trail(spec.name)
    trail.touch(plan.region if plan.existing else None,
                [n for n in plan.existing if n.live])
    trail.touch(plan.region)
    try:
        return _apply(rt, spec, plan, observed, deadline=deadline, wait_ssh=wait_ssh,
                      timeout=timeout, trail=trail, accept_host_keys=accept_host_keys,
                      force_steps=force_steps if bootstrap and wait_ssh else None)
    except ClusterBusyError:
        raise  # another `up` of the cluster: what runs is its, not for this one's `down`
    except (Exception, KeyboardInterrupt) as exc:
        report_failure(rt, trail, exc)
        raise


def _after_other(rt: Runtime, spec: Spec, observed: Observed, timeout: float,
                 observe: Callable[[], Observed]) -> Observed:
    """The world once the stack another `up` or `down` left in progress has ended (at
    most ``timeout`` seconds; this `up` holds the cluster's lock, so it is another
    machine's, or one interrupted here): ``observe()`` again."""
    assert observed.stack is not None
    stackops.wait_other(rt, observed.region, stack_name(spec.name), observed.stack.stack_id,
                        observed.stack.status, timeout=timeout)
    return observe()


def _apply(rt: Runtime, spec: Spec, plan: UpPlan, observed: Observed, *, deadline: float,
           wait_ssh: bool, timeout: float, trail: Trail,
           accept_host_keys: Sequence[str] = (),
           force_steps: Sequence[str] | None = ()) -> UpResult:
    """The changes `up` confirmed (``provision``), then SSH and the bootstrap
    (``force_steps`` None: no bootstrap)."""
    stacks = Stacks()
    made = provision(rt, spec, plan, observed, deadline=deadline, timeout=timeout,
                     trail=trail, stacks=stacks)
    return _reach(rt, spec, made, stacks, deadline, accept_host_keys, force_steps, wait_ssh)


def provision(rt: Runtime, spec: Spec, plan: UpPlan, observed: Observed, *,
              deadline: float, timeout: float, trail: Trail,
              stacks: Stacks | None = None) -> ProvisionRecord:
    """Stack, surplus nodes, started nodes, launch, tags, mount target: what the plan
    says and nothing else. A stack it creates may still be in progress (what the launch
    needs made): ``stacks`` holds it for ``complete``; without ``stacks`` it is finished
    here."""
    actions = plan.nodes
    region = plan.region
    record.save(spec, region)
    if not actions.empty:
        nodecache.forget(spec.name)
    own, stacks = stacks is None, stacks or Stacks()
    if plan.existing:
        stacks.prepare(rt, spec, _region_plan(plan, region), plan.role, timeout)
    if actions.terminate:
        rt.started(Stage.TERMINATE, f"terminating surplus node(s): {', '.join(actions.terminate)}")
        instances.terminate_instances(rt.session, region, actions.terminate)
    stopped.start_stopped(rt, region, actions.start, deadline=deadline)
    new: list[Node] = []
    if actions.launch:
        region, launched = _launch(rt, spec, plan, stacks, timeout, trail)
        new = _wait_new(rt, region, launched, deadline)
    record.save(spec, region)
    profiles.create(rt, spec.name, plan.profiles, region)  # the nodes boot meanwhile
    kept = plan.kept
    if actions.start or any(n.state != InstanceState.RUNNING for n in kept):
        kept = launch.wait_running(rt, region, [n.instance_id for n in kept],
                                   deadline=deadline)
    # else the nodes kept as found, and the new ones as they came up: none read again
    made = ProvisionRecord(stacks.made[region], new=tuple(new),
                           started=tuple(n for n in kept if n.instance_id in actions.start),
                           kept=tuple(n for n in kept if n.instance_id not in actions.start))
    _retag(rt, plan, region, new)  # described running: root volume ids are known
    subnet = next((n.subnet_id for n in made.nodes if n.subnet_id), None)
    if not new:  # no launch made it: a kept file system on running nodes gets it here
        efsaccess.mount_target(rt, made.stack, subnet, made.nodes[0].az if made.nodes else "",
                               plan.mount_targets, plan.lent_targets)
    made = replace(made, efs_subnet=subnet, profiles=plan.profiles)
    return complete(rt, made, stacks, deadline) if own else made


def complete(rt: Runtime, made: ProvisionRecord, stacks: Stacks,
             deadline: float) -> ProvisionRecord:
    """``made`` with its stack complete (a failed one terminates the nodes this `up`
    launched), its roles in the instance profiles made for them, and the nodes'
    profile on every node that needs it."""
    stack = stacks.finish(rt, made.region, made.new, max(1.0, deadline - rt.clock()))
    made = replace(made, stack=stack)
    profiles.add_roles(rt, made.profiles, stack)
    efsaccess.give_profile(rt, stack, made.nodes, deadline)
    return made


def _reach(rt: Runtime, spec: Spec, made: ProvisionRecord, stacks: Stacks, deadline: float,
           accept_host_keys: Sequence[str], force_steps: Sequence[str] | None,
           wait_ssh: bool) -> UpResult:
    """SSH on every node (host keys checked and recorded) while the stack finishes, then
    the stack complete, the EFS mount target ready, and the bootstrap."""
    running, new, region = list(made.nodes), list(made.new), made.region
    uprecord.name_nodes(rt.report, running)  # the timeline's rows: master, worker-N
    pinned = hostkeys.pinned_keys(spec.name, running, new, accept_host_keys)
    host_keys = wait_for_ssh(rt, spec, region, running, new, deadline, pinned) if wait_ssh else {}
    hostkeys.check_and_record(rt, spec.name, running, host_keys, port=spec.ssh.port,
                              accept=accept_host_keys)
    known = record_host_keys(spec, running, host_keys)
    hosts = write_ssh_hosts(spec, running)  # `ssh NAME`, `ssh NAME-worker-1`
    made = complete(rt, made, stacks, deadline)  # its instance profile: minutes, meanwhile
    efsaccess.mount_ready(rt, made, deadline)  # created before the SSH wait, ready by now mostly
    booted = None
    if force_steps is not None:
        booted = bootstrap_nodes(rt, spec, made, force=force_steps,
                                 timeout=max(60.0, deadline - rt.clock()),
                                 dataset=view_for_up(rt, spec, region, running))
        if booted.ok:  # every node ready: `train` may start on these without asking AWS
            nodecache.save(spec.name, running)
            stopping = up_stage(rt, spec, region, running, bool(made.new or made.started))
            if stopping is not None:
                return replace(up_result(spec, region, running, host_keys, known, booted,
                                         hosts), autostop=stopping)
    return up_result(spec, region, running, host_keys, known, booted, hosts)


def up_result(spec: Spec, region: str, nodes: Sequence[Node], host_keys: dict[str, str],
              known: Path | None, booted: BootstrapResult | None = None,
              hosts: Path | None = None) -> UpResult:
    """The nodes in index order with their addresses and host keys (``known``: the
    known_hosts file ``record_host_keys`` wrote; ``hosts``: the cluster's ssh entries
    ``write_ssh_hosts`` wrote, with the Include line when ~/.ssh/config lacks it)."""
    ordered = sorted(nodes, key=node_order)
    rows = tuple(UpNode(n.index, n.role, n.instance_id, n.instance_type, n.az, n.market,
                        address_or_none(n), n.private_ip, host_keys.get(n.instance_id))
                 for n in ordered)
    return UpResult(spec.name, region, cluster_hourly(ordered), rows, ssh_user=spec.ssh.user,
                    ssh_port=spec.ssh.port, known_hosts=known, bootstrap=booted,
                    ssh_hosts=hosts, ssh_include=None if hosts is None or sshhosts.included()
                    else sshhosts.include_line())
