"""An elastic torchrun job (``train.elastic``) goes on smaller while a lost node is
replaced.

A node other than the master that gets a spot notice (or finds its GPUs unfit) leaves
the job: its supervisor stops its torchrun agent, which leaves the c10d rendezvous open,
and tells the master, which goes on with the others while they are at least
``train.elastic.min`` (``node/coord.py``). The agents left re-form the group at the
smaller size and restart their workers from the checkpoint. Meanwhile whoever follows
the job (`train`, `train --attach`, the master's recovery controller, in each run of the
job: ``growth``) replaces the node here, in a thread of its own:

1. it waits until the node's supervisor has ended (the agent is gone), at most
   ``train.node_timeout``;
2. the node is replaced as a recovery replaces it (``recovery.replace_lost``: its
   instance terminated, its standby swapped in or the index launched and bootstrapped by
   `up`; a recovery of ``train.max_recoveries``);
3. a supervisor is started on the new node for the same job (the master's job.json: the
   coordinator, its token, the rendezvous port, the workdir): its agent joins the
   rendezvous, and torchrun restarts the group at the full size; its log is followed
   into the job's output from then on, and a notice on it handled the same way.

The master's own loss, or a loss below the minimum, stops the job: `train` recovers it
as any other job (stop, replace, restart from the checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs import transport, workdir
from clusterkit.cluster.jobs.attempt import (
    Job,
    Sync,
    gpus_of,
    metadata_endpoint,
    node_slots,
    start_call,
)
from clusterkit.cluster.jobs.recovery import Growth, ec2_nodes, node_name, replace_lost
from clusterkit.cluster.jobs.standby import Standbys, node_index
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Stage
from clusterkit.node import bundle, jobfile
from clusterkit.node.interruption import STOPPING_KINDS
from clusterkit.node.jobfile import JobFile
from clusterkit.plan.recovery import Loss, LossReason, Recovery
from clusterkit.remote.channels import Call
from clusterkit.training import topology

MASTER = 0


class Replacements:
    """An elastic job's lost nodes replaced while it runs (a thread each); ``then``: the
    notices' other handler (the standbys')."""

    def __init__(self, rt: Runtime, job: Job, *, limit: int, made: int = 0,
                 standbys: Standbys | None = None, out: TextIO | None = None) -> None:
        self.rt, self.job, self.limit, self.standbys = rt, job, limit, standbys
        self.made = made  # the job's recoveries before this attempt (of ``limit``)
        self.out = out  # where the job's logs go: a joined node's too
        self.job_id: str | None = None  # set once the job started (the first notice's)
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.busy: set[int] = set()
        self.done: list[Recovery] = []
        self.joined: dict[int, float] = {}  # index -> when its new supervisor started

    def on_notice(self, node: str, notice: Mapping[str, Any]) -> None:
        if self.standbys is not None:
            self.standbys.on_notice(node, notice)
        index = node_index(node)
        if notice.get("kind") not in {k.value for k in STOPPING_KINDS} or not index:
            return
        with self.lock:
            if index in self.busy or self.made + len(self.done) + len(self.busy) >= self.limit:
                return
            self.busy.add(index)
        thread = threading.Thread(target=self._replace, args=(index, time.time()),
                                  name=f"elastic-replace-{index}", daemon=True)
        self.threads.append(thread)
        thread.start()

    def _replace(self, index: int, since: float) -> None:
        joined = None
        try:
            joined = self._replace_node(index, since)
        except ClusterkitError as exc:
            self.rt.warn(f"{node_name(self.job, index)} was "
                         f"not replaced: {exc}", stage=Stage.TRAIN)
        finally:
            with self.lock:
                self.busy.discard(index)
        if joined is not None:
            self._follow(index, joined)

    def _follow(self, index: int, job_id: str) -> None:
        """The joined node's log in the job's output, and its notices handled (it may
        leave too), until its supervisor of the job ends."""
        try:
            jc = jobs.open_job_cluster(self.rt, self.job.spec_file, self.job.region)
            jobs.follow_logs(jc, job_id, keep_following=True, out=self.out,
                             chosen=[t for t in jc.targets if t.node.index == index],
                             on_notice=self.on_notice)
        except ClusterkitError as exc:
            self.rt.warn(f"the log of {node_name(self.job, index)} is not followed: {exc}",
                         stage=Stage.TRAIN)

    def _replace_node(self, index: int, since: float) -> str | None:
        """The node replaced and its supervisor started: the job's id, once it joined."""
        job_id = self._job_id()
        name = node_name(self.job, index)
        self.rt.info(f"job {job_id} goes on without {name}; replacing it meanwhile",
                     stage=Stage.TRAIN)
        wait_left(self.rt, self.job, job_id, index)
        nodes = ec2_nodes(self.rt, self.job) or []
        loss = Loss({index: LossReason.NOTICE}, since=since, stopped=time.time())
        with self.lock:
            number = self.made + len(self.done) + 1
        recovery = replace_lost(self.rt, self.job, nodes, loss, job_id, number, self.limit,
                                self.standbys)
        with self.lock:
            self.done.append(recovery)
        if not join(self.rt, self.job, job_id, index):
            return None
        self.joined[index] = time.time()
        return job_id

    def _job_id(self) -> str:
        if self.job_id is None:
            jc = jobs.open_job_cluster(self.rt, self.job.spec_file, self.job.region)
            self.job_id = jobs.latest_job(jobs.node_jobs(jc))
        if self.job_id is None:
            raise ClusterkitError("the job's id is unknown", "is the job still running?")
        return self.job_id

    def close(self, timeout: float = 1200.0) -> list[Recovery]:
        """Every replacement under way finished; the recoveries made."""
        for thread in self.threads:
            thread.join(timeout)
        return list(self.done)


def growth(rt: Runtime, job: Job, *, standbys: Standbys | None = None,
           out: TextIO | None = None) -> Growth:
    """Each attempt's notice handler (``recovery.Growth``): for an elastic job, its
    ``Replacements`` while recoveries are left (the attempt's ``made`` of its ``limit``);
    else the standbys' alone. `train`, `train --attach` (and so the master's
    controller) and every restart of a recovery use it, so a node that leaves is replaced
    whoever follows the job."""
    assert job.spec.train is not None
    elastic = job.spec.train.elastic is not None

    def attempt(made: int, limit: int) -> tuple[jobs.OnNotice | None,
                                                Callable[[], list[Recovery]]]:
        if not elastic or made >= limit:
            return (standbys.on_notice if standbys else None), list
        grows = Replacements(rt, job, limit=limit, made=made, standbys=standbys, out=out)
        return grows.on_notice, grows.close

    return attempt


def wait_left(rt: Runtime, job: Job, job_id: str, index: int) -> None:
    """Until node ``index``'s supervisor of the job has ended, ``train.node_timeout`` at
    most (a node that does not answer is terminated anyway)."""
    assert job.spec.train is not None
    deadline = rt.clock() + job.spec.train.node_timeout
    while rt.clock() < deadline:
        try:
            jc = jobs.open_job_cluster(rt, job.spec_file, job.region)
            chosen = [t for t in jc.targets if t.node.index == index]
            found = jobs.node_jobs(dataclasses.replace(jc, targets=chosen)) if chosen else {}
            state = next((jobs.job_on(v, job_id) for v in found.values()), None)
            if state is None or (state.state.final and not state.supervisor_running):
                return
        except ClusterkitError:
            return  # the node does not answer: its instance goes anyway
        rt.sleep(max(rt.poll, 0.5))


def master_job(jc: jobs.JobCluster, job_id: str) -> JobFile:
    """The master's job file of the job (its coordinator's token, its torchrun)."""
    path = f"{jobs.job_dir(job_id)}/{jobfile.NAME}"
    group = jc.run([jc.master], {jc.master.hop.label: Call(f"cat {path}")}, timeout=30)
    text = next(iter(group.values())).stdout
    return JobFile.from_json(json.loads(text), f"the master's {path}")


def join(rt: Runtime, job: Job, job_id: str, index: int) -> bool:
    """A supervisor of job ``job_id`` started on node ``index`` (just replaced): its
    torchrun agent joins the job's rendezvous. False when the job has ended meanwhile."""
    jc = jobs.open_job_cluster(rt, job.spec_file, job.region)
    state = jobs.job_on(jobs.node_jobs(dataclasses.replace(jc, targets=[jc.master])).get(
        jc.master.hop.label, []), job_id)
    if state is None or state.state.final or not state.state.active:
        rt.info(f"job {job_id} ended before its node {index} was back", stage=Stage.TRAIN)
        return False
    master = master_job(jc, job_id)
    target = next(t for t in jc.targets if t.node.index == index)
    mine = node_job(job, jc, master, index, metadata_endpoint(target.node.instance_id))
    cwd = mine.processes[0].cwd
    sync = None
    if job.workdir is not None and not job.workdir.shared:
        data = workdir.pack(job.workdir.local, workdir.files(job.workdir.local))
        sync = Sync(data, cwd, False)
    call = start_call(job_id, mine, bundle.files(), sync)
    jc.run([target], {target.hop.label: call}, timeout=120)
    rt.done(Stage.TRAIN, f"{jc.node_name(index)} joins job {job_id}")
    return True


def node_job(job: Job, jc: jobs.JobCluster, master: JobFile, index: int,
             imds: str) -> JobFile:
    """Node ``index``'s job.json as the job's start would have written it with the
    cluster as it is now (its coordinator, token and rendezvous port the master's)."""
    spec = job.spec
    assert spec.train is not None
    entry = master.processes[0]
    slots = node_slots(jc)
    gpus = gpus_of(jc.nodes[0])
    rdzv_port = int(entry.env["MASTER_PORT"])
    procs = topology.job_processes(
        spec, slots, job_id=master.job_id, command=job.command, port=rdzv_port,
        rdzv_port=rdzv_port, gpus_per_node=gpus, workdir=entry.cwd,
        restart_count=int(entry.env.get("CLUSTERKIT_RESTART_COUNT", "0")),
        efa_interfaces=transport.expected_efa(spec, jc.nodes[0].instance_type))
    slot = next(s for s in slots if s.index == index)
    c, s = master.coordinator, master.stopping
    target = next(t for t in jc.targets if t.node.index == index)
    return topology.job_file(
        procs, slot, cluster=jc.name, job_id=master.job_id, num_nodes=c.num_nodes,
        coordinator_host=c.host, coordinator_port=c.port, imds=imds,
        checkpoint_signal=s.checkpoint_signal, checkpoint_grace=s.checkpoint_grace,
        heartbeat_timeout=c.heartbeat_timeout, recovery=master.recovery,
        sampling=topology.sampling_of(spec, gpus_of(target.node)),
        block_end=target.node.block_end, elastic_min=master.elastic_min,
    ).with_token(c.token)
