"""Standbys: a rebalance recommendation's replacement, ready before the node is lost.

EC2 posts a rebalance recommendation when a spot instance is at elevated risk of being
reclaimed, often well before the two-minute notice. While `train` (or `train --attach`)
drives a job with recoveries left and ``train.prelaunch_on_rebalance``, a
recommendation for node N launches one instance at once in N's AZ, type and market with
the cluster's launch template and placement group, tagged as a standby for N (no index:
no other command counts it as a node), waits for its SSH, gives it the stack's instance
profile and bootstraps it as node N of the cluster as it would be with it (its hosts,
known_hosts, EFS, dataset clone, environment). If N is then lost the recovery swaps the
standby in (its tags made N's) instead of launching: the restart waits for no boot. A
standby no notice claimed within ``train.standby_minutes`` is terminated, and so is any
left when the job ends. `status` lists a standby with its cost; `down` removes it.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from clusterkit.aws import instances
from clusterkit.aws import stack as aws_stack
from clusterkit.bootstrap import run
from clusterkit.catalog.ranking import Offer
from clusterkit.cluster.access import hostkeys
from clusterkit.cluster.access.remote_ops import cluster_nodes, login_for, spec_login
from clusterkit.cluster.jobs.attempt import Job
from clusterkit.cluster.provision import efsaccess, launch
from clusterkit.cluster.provision.bootstrap import cluster_view
from clusterkit.cluster.provision.reach import record_host_keys, wait_for_ssh
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Stage
from clusterkit.plan.nodes import Node, swap_tags
from clusterkit.plan.provision import ProvisionRecord, StackRecord
from clusterkit.plan.stack import stack_name
from clusterkit.remote.address import targets

BOOT_TIMEOUT = 1200.0  # seconds for a standby to run, answer SSH and be bootstrapped


def node_index(name: str) -> int | None:
    """``master`` -> 0, ``worker-N`` -> N; None otherwise."""
    if name == "master":
        return 0
    head, _, number = name.rpartition("-")
    return int(number) if head == "worker" and number.isdigit() else None


class Standbys:
    """The job's standbys: booting (a thread each) and ready (index -> its node)."""

    def __init__(self, rt: Runtime, job: Job, *, minutes: float,
                 prepare: Callable[[Runtime, Job, int], Node] | None = None,
                 timer: Callable[..., threading.Timer] = threading.Timer) -> None:
        self.rt, self.job, self.seconds = rt, job, minutes * 60
        self.prepare = prepare or prepare_standby
        self.timer = timer
        self.lock = threading.Lock()
        self.booting: dict[int, threading.Thread] = {}
        self.ready: dict[int, Node] = {}
        self.expiry: dict[int, threading.Timer] = {}
        self.closed = False

    def on_notice(self, node: str, notice: Mapping[str, Any]) -> None:
        """A node's spot notice (``control.OnNotice``): a rebalance recommendation
        starts its standby, once per node."""
        index = node_index(node)
        if notice.get("kind") != "rebalance" or index is None:
            return
        with self.lock:
            if self.closed or index in self.booting:
                return
            thread = threading.Thread(target=self._boot, args=(index,), daemon=True,
                                      name=f"standby-{index}")
            self.booting[index] = thread
        self.rt.info(f"{node}: rebalance recommendation: launching its standby",
                     stage=Stage.TRAIN)
        thread.start()

    def _boot(self, index: int) -> None:
        try:
            node = self.prepare(self.rt, self.job, index)
        except (ClusterkitError, OSError) as exc:
            self.rt.warn(f"no standby for node {index}: {exc}", stage=Stage.TRAIN)
            return
        with self.lock:
            if not self.closed:
                self.ready[index] = node
                expire = self.timer(self.seconds, self._expire, (index,))
                expire.daemon = True
                self.expiry[index] = expire
                expire.start()
                return
        terminate(self.rt, [node], "the job ended while it booted")

    def take(self, index: int) -> Node | None:
        """The ready standby for node ``index`` (one still booting is waited for: its
        boot is further along than a new launch), handed over; None when there is none."""
        thread = self.booting.get(index)
        if thread is not None:
            thread.join(BOOT_TIMEOUT)
        with self.lock:
            self.booting.pop(index, None)
            timer = self.expiry.pop(index, None)
            if timer is not None:
                timer.cancel()
            return self.ready.pop(index, None)

    def _expire(self, index: int) -> None:
        with self.lock:
            node = self.ready.pop(index, None)
            self.expiry.pop(index, None)
            self.booting.pop(index, None)
        if node is not None:
            terminate(self.rt, [node], f"no interruption notice came within "
                      f"{self.seconds / 60:g} min (train.standby_minutes)")

    def close(self) -> None:
        """Every standby still held terminated (one still booting is, once booted)."""
        with self.lock:
            self.closed = True
            left = list(self.ready.values())
            self.ready.clear()
            for timer in self.expiry.values():
                timer.cancel()
        if left:
            terminate(self.rt, left, "the job no longer needs it")


def terminate(rt: Runtime, nodes: Sequence[Node], why: str) -> None:
    for node in nodes:
        rt.info(f"terminating standby {node.instance_id}: {why}", stage=Stage.TRAIN)
        instances.terminate_instances(rt.session, node.region, [node.instance_id])


def prepare_standby(rt: Runtime, job: Job, index: int) -> Node:
    """Launch, reach and bootstrap a standby for node ``index`` (see the module's
    docstring); terminated again when any of it fails."""
    spec = job.spec
    nodes = cluster_nodes(rt, spec.name, login_for(job.spec_file, job.region)[1])
    lost = next((n for n in nodes if n.index == index), None)
    if lost is None:
        raise ClusterkitError(f"node {index} of cluster {spec.name} is not running")
    region = lost.region
    stack = StackRecord.of(region, aws_stack.stack_record(rt.session, region,
                                                           stack_name(spec.name)))
    offer = Offer(lost.instance_type, region, lost.az, None, lost.market, lost.price, None,
                  gpus=0)
    [new] = launch.gang_launch(
        rt, spec, offer, [index], launch_template_id=stack.launch_template_id,
        subnet_id=lost.subnet_id or "", stack_id=stack.stack_id,
        placement_group=stack.placement_group, standby_of=lost.instance_id,
        security_group=stack.security_group)
    try:
        deadline = rt.clock() + BOOT_TIMEOUT
        [node] = launch.wait_running(rt, region, [new.instance_id], deadline=deadline)
        keys = wait_for_ssh(rt, spec, region, [node], [node], deadline, {})
        hostkeys.check_and_record(rt, spec.name, [node], keys, port=spec.ssh.port)
        record_host_keys(spec, [node], keys)
        efsaccess.give_profile(rt, stack, [node])
        bootstrap_standby(rt, job, stack, nodes, node, index, deadline)
    except BaseException:
        terminate(rt, [new], "its preparation failed")
        raise
    rt.done(Stage.TRAIN, f"standby {node.instance_id} for node {index} is ready")
    return node


def bootstrap_standby(rt: Runtime, job: Job, stack: StackRecord, nodes: Sequence[Node],
                      standby: Node, index: int, deadline: float) -> None:
    """Every bootstrap step on the standby alone, as node ``index`` of the cluster with
    it in that node's place (the view the recovery's `up` will have)."""
    spec = job.spec
    as_node = dataclasses.replace(standby, index=index)
    view_nodes = tuple(as_node if n.index == index else n for n in nodes)
    view = cluster_view(spec, ProvisionRecord(stack, kept=view_nodes))
    login = spec_login(spec)
    run.run(login, targets(view_nodes, [as_node]), spec, view, report=rt.report,
            timeout=max(60.0, deadline - rt.clock()))  # BootstrapError when a step fails


def swap_in(rt: Runtime, standby: Node, cluster: str, index: int) -> None:
    """The standby becomes node ``index``: its tags (and its volumes') made the node's."""
    tags, dropped = swap_tags(cluster, index)
    resources = [standby.instance_id, *standby.volume_ids]
    instances.create_tags(rt.session, standby.region, resources, tags)
    instances.delete_tags(rt.session, standby.region, resources, dropped)
    rt.done(Stage.TRAIN, f"standby {standby.instance_id} is node {index} now")
