"""One attempt of `clusterkit train` (``train.py``: the command, its recoveries and
report around it): one job on every node of a running cluster.

1. the cluster's nodes: those `up` last saw (``cluster/access/nodecache.py``) when they are
   kept, else from AWS (running nodes, host keys checked);
2. one call per node says what the start needs: the node's jobs, and on the master
   free ports (bind test there, per job), ``$HOME``, the spec's node workdir resolved,
   and, for kept nodes, its hosts block; kept nodes that do not all answer, or that the
   hosts block does not name, send step 1 to AWS;
3. refuse while a job is active on any node (``replace``: stop it first), so a stale
   server never meets a new scheduler; CUDA warnings of the spec's packages against
   the instance type;
4. the workdir synced (``cluster/jobs/workdir.py``): to EFS through the master first, or
   to every node inside step 5's call;
5. every node's job.json (0600) and the supervisor's files (``node.bundle.files``)
   sent as one tar over SSH stdin into the job dir, and the node's supervisor started,
   every node at once;
6. unless ``detach``, every log streamed live until the job ends (``cluster/jobs/nodejobs.py``).

Two SSH round trips per node before the job runs (three with EFS), on one connection
each.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TextIO

from clusterkit import sandboxmode
from clusterkit.bootstrap.steps import host_names
from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.jobs import budget, ending, top, transport, workdir
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster, JobOutcome, job_dir, node_python
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, GroupError, RemoteError, UsageError
from clusterkit.events import Stage
from clusterkit.netguard import SANDBOX_ENV
from clusterkit.node import bundle, interruption, jobfile
from clusterkit.node.jobfile import JobFile, RecoveryRecord
from clusterkit.node.jobstate import JobState, JobStateName
from clusterkit.plan.nodes import Node
from clusterkit.plan.recovery import job_record, recoveries_of
from clusterkit.remote.address import ssh_address
from clusterkit.remote.archive import tar_bytes
from clusterkit.remote.channels import Call
from clusterkit.remote.fanout import Connections
from clusterkit.remote.results import GroupResult
from clusterkit.spec.model import Spec, Train
from clusterkit.training import topology
from clusterkit.training.jobfiles import state_of

WORKDIR_MEMBER = "workdir.tar.gz"  # the packed workdir in the start's tar (then deleted)
PORTS = 3  # the scheduler's (MXNet) or MASTER_PORT, torchrun's rendezvous, the supervisors'
# Where the job dirs live, made writable for the login user (root in the sandbox; on AWS
# `ubuntu`, through sudo once).
_JOBS_READY = (f'ck_root=; [ "$(id -u)" -eq 0 ] || ck_root="sudo -n"; '
               f'[ -w {jobs.JOBS_DIR} ] || {{ $ck_root mkdir -p {jobs.JOBS_DIR} && '
               f'$ck_root chown "$(id -u):$(id -g)" {jobs.JOBS_DIR}; }}')


def training_command(spec: Spec, command: Sequence[str]) -> str:
    """The words after ``--`` (joined as ssh joins them), else ``train.command``."""
    text = " ".join(command).strip() or (spec.train.command or "" if spec.train else "")
    if not text.strip():
        raise UsageError(f"{spec.file}: no training command",
                         "set train.command in the spec, or give it after `--`: "
                         "clusterkit train SPEC -- python3 train.py ...")
    return text


@dataclass(frozen=True)
class Ready:
    """What the nodes said before the start (``follower.py prepare``, one call each)."""

    jobs: dict[str, list[JobState]]  # label -> that node's jobs
    ports: list[int]  # free on the master
    home: str  # the login's $HOME on the master
    hosts: str  # the master's /etc/hosts (asked of kept nodes only)
    cwd: str | None  # the spec's node workdir (absolute, ~ expanded) on the master


def prepare_calls(jc: JobCluster, node_workdir: str | None) -> dict[str, Call]:
    """``follower.py prepare`` per node: jobs everywhere; ports, $HOME, the node
    workdir and (kept nodes) the hosts block on the master."""
    words = ["prepare", "--ports", str(PORTS)]
    words += ["--hosts"] if jc.cached else []
    words += ["--cd", node_workdir] if node_workdir is not None else []
    calls = {t.hop.label: jobs.follower_call("prepare") for t in jc.targets[1:]}
    return {jc.master.hop.label: jobs.follower_call(*words), **calls}


def read_ready(jc: JobCluster, group: GroupResult) -> Ready:
    answers = {label: json.loads(r.stdout.strip().splitlines()[-1])
               for label, r in group.items()}
    master = answers[jc.master.hop.label]
    ports = [int(p) for p in master.get("ports", [])]
    if len(ports) < PORTS:
        raise RemoteError(f"no {PORTS} free ports on the master", "is the master busy?")
    node_jobs = {label: [state_of(j, f"node {label}") for j in a["jobs"]]
                 for label, a in answers.items()}
    return Ready(node_jobs, ports, master["home"],
                 master.get("hosts", ""), master.get("cwd"))


def ready_cluster(rt: Runtime, stack: contextlib.ExitStack, jc: JobCluster,
                  node_workdir: str | None, reopen: Callable[[], JobCluster],
                  ) -> tuple[JobCluster, Ready]:
    """``jc`` with its connections open (closed with ``stack``) and what its nodes said.
    Kept nodes (``jc.cached``) that do not all answer, or that the master's hosts block
    does not name, are dropped for ``reopen()`` (the cluster from AWS)."""
    jc = dataclasses.replace(jc, pool=stack.enter_context(Connections(jc.login, jc.targets)))
    try:
        group = jc.run(jc.targets, prepare_calls(jc, node_workdir), timeout=60)
        ready = read_ready(jc, group)
        if not jc.cached or jobs.cached_nodes_hold(jc, ready.hosts):
            return jc, ready
        why = "the master's hosts block names other nodes"
    except (GroupError, RemoteError, ValueError, KeyError) as exc:
        if not jc.cached:
            raise
        why = str(exc).splitlines()[0]
    assert jc.pool is not None
    jc.pool.close()
    rt.info(f"the nodes `up` last saw do not hold ({why}); asking AWS", stage=Stage.TRAIN)
    return ready_cluster(rt, stack, reopen(), node_workdir, reopen)


def refuse_running(rt: Runtime, jc: JobCluster, ready: Ready, replace: bool) -> None:
    """Refuse while a job is active on any node (``replace``: stop it first); a job that
    ended and is only stopping still (a failed one's servers) is waited for."""
    running = jobs.active_jobs(ready.jobs)
    if running and not replace and ending.stopping(ready.jobs, jc.master.hop.label, running):
        ending.wait_ended(rt, jc, ready.jobs, running)
        return
    if running and not replace:
        raise ClusterkitError(
            f"job {', '.join(running)} is running on cluster {jc.name}",
            f"wait for it (`clusterkit logs {jc.name} -f`), stop it (`clusterkit stop "
            f"{jc.name}`), or start with --replace to stop it first")
    for job_id in running:
        rt.info(f"stopping job {job_id} (--replace)", stage=Stage.TRAIN)
        jobs.stop_job(jc, job_id)


@dataclass(frozen=True)
class Sync:
    """The packed workdir, where it lands (absolute) and on which nodes."""

    data: bytes
    remote: str
    shared: bool


def pack_workdir(rt: Runtime, jc: JobCluster, plan: workdir.Workdir, home: str) -> Sync:
    names = workdir.files(plan.local)
    data = workdir.pack(plan.local, names)
    where = "the EFS (through the master)" if plan.shared else f"{len(jc.targets)} node(s)"
    rt.started(Stage.TRAIN, f"syncing {len(names)} file(s) ({len(data) >> 10} KiB) from "
               f"{plan.local} to {plan.remote} on {where}")
    remote = home + plan.remote[len("$HOME"):] if plan.remote.startswith("$HOME") \
        else plan.remote
    return Sync(data, remote, plan.shared)


def sync_shared(jc: JobCluster, sync: Sync, job_id: str) -> None:
    """The workdir onto the EFS, once, through the master (before any node starts)."""
    call = Call(workdir.extract_command(sync.remote, job_id), sync.data)
    jc.run([jc.master], {jc.master.hop.label: call}, timeout=600)


def node_slots(jc: JobCluster) -> list[topology.NodeSlot]:
    """The nodes as the job sees them: the in-cluster address (what the master dials)."""
    return [topology.NodeSlot(t.node.index or 0, ssh_address(t.node, via_gateway=True),
                              host_names(jc.name, t.node.index or 0)[0])
            for t in jc.targets]


def job_archive(job: JobFile, files: Mapping[str, str], workdir_data: bytes | None = None,
                ) -> bytes:
    """job.json (0600), the supervisor's files (0700) and, when given, the packed workdir
    (0600) as a tar for the node's stdin."""
    entries = [jobfile.archive_entry(job)]
    entries += [(name, text.encode(), 0o700) for name, text in sorted(files.items())]
    entries += [(WORKDIR_MEMBER, workdir_data, 0o600)] if workdir_data is not None else []
    return tar_bytes(entries)


def start_command(job_id: str, workdir_remote: str | None = None) -> str:
    """Unpack the job's tar into its dir; with ``workdir_remote``, the workdir member
    swapped in there first (umask 022, as a sync of its own had it); then the
    supervisor."""
    d = shlex.quote(job_dir(job_id))
    sync = ""
    if workdir_remote is not None:
        sync = (f"(umask 022; {workdir.extract_command(workdir_remote, job_id)}) "
                f"< {d}/{WORKDIR_MEMBER} > /dev/null; rm -f -- {d}/{WORKDIR_MEMBER}; ")
    return (f"set -e; umask 077; {_JOBS_READY}; mkdir -m 0700 {d}; "
            f"tar -x -C {d} --no-same-owner; {sync}"
            f"{node_python()} {d}/supervisor.py start {d}")


def cuda_warnings(spec: Spec, instance_types: Sequence[str]) -> list[str]:
    """validate's CUDA warnings for the instance types the cluster actually runs."""
    from clusterkit.spec.checks import cuda_warnings as warnings

    return list(dict.fromkeys(w for t in dict.fromkeys(instance_types)
                              for w in warnings(spec, t)))


def gpus_of(node: Node) -> int:
    """How many GPUs the node's instance type has (the catalog; 0 when unknown)."""
    itype = instance_type(node.instance_type)
    return itype.gpu_count if itype else 0


def metadata_endpoint(instance_id: str) -> str:
    """What a node's supervisor watches for spot interruption notices: EC2's instance
    metadata; in the sandbox, the instance's metadata where the sandbox serves it, on its
    own loopback endpoint (its nodes dial nothing else: ``sandboxmode.metadata_url``)."""
    if os.environ.get(SANDBOX_ENV) == "1":
        return sandboxmode.metadata_url(instance_id)
    return interruption.DEFAULT_ENDPOINT


@dataclass(frozen=True)
class Restart:
    """A job started again after lost nodes were replaced: its record (``plan.recovery
    .job_record``: the first job, the restart count, every recovery so far)."""

    record: RecoveryRecord

    @property
    def count(self) -> int:
        return self.record.restart_count


def start(rt: Runtime, jc: JobCluster, spec: Spec, command: str, job_id: str,
          cwd: str, ports: Sequence[int], sync: Sync | None = None,
          restart: Restart | None = None, extra: Mapping[str, str] | None = None) -> None:
    """Every node's job files and supervisor, all nodes at once; ``sync``: a workdir
    for every node, swapped in by the same call; ``restart``: the job's recovery record
    (each process gets ``CLUSTERKIT_RESTART_COUNT``); ``extra``: more files for the job's
    directory (name -> text: `--nccl-test`'s script)."""
    slots = node_slots(jc)
    gpus = gpus_of(jc.nodes[0])
    try:
        procs = topology.job_processes(spec, slots, job_id=job_id, command=command,
                                       port=ports[0], rdzv_port=ports[1],
                                       gpus_per_node=gpus, workdir=cwd,
                                       restart_count=restart.count if restart else 0,
                                       efa_interfaces=transport.expected_efa(
                                           spec, jc.nodes[0].instance_type))
    except ValueError as exc:
        raise UsageError(f"{spec.file}: {exc}", "check the train section") from exc
    token, files = secrets.token_hex(16), {**bundle.files(), **(extra or {})}
    train = spec.train or Train()
    calls = {}
    for target, slot in zip(jc.targets, slots, strict=True):
        job = topology.job_file(procs, slot, cluster=jc.name, job_id=job_id,
                                num_nodes=len(slots), coordinator_host=slots[0].address,
                                coordinator_port=ports[2],
                                imds=metadata_endpoint(target.node.instance_id),
                                checkpoint_signal=train.checkpoint_signal,
                                checkpoint_grace=train.checkpoint_grace,
                                heartbeat_timeout=train.node_timeout,
                                recovery=restart.record if restart else
                                job_record(job_id, [], command),
                                sampling=topology.sampling_of(spec, gpus_of(target.node)),
                                block_end=target.node.block_end,
                                elastic_min=train.elastic.min if train.elastic else 0,
                                ).with_token(token)
        calls[target.hop.label] = start_call(job_id, job, files, sync)
    rt.started(Stage.TRAIN, f"starting job {job_id}: {len(procs)} process(es) on "
               f"{len(slots)} node(s)")
    jc.run(jc.targets, calls, timeout=120)
    rt.done(Stage.TRAIN, f"job {job_id} started on {len(slots)} node(s)")


def start_call(job_id: str, job: JobFile, files: Mapping[str, str],
               sync: Sync | None) -> Call:
    """The call that starts one node's supervisor of ``job`` (with ``sync``'s workdir)."""
    return Call(start_command(job_id, sync.remote if sync else None),
                job_archive(job, files, sync.data if sync else None))


@dataclass(frozen=True)
class Job:
    """What `train` starts, again as it was after a recovery."""

    spec_file: str
    spec: Spec
    command: str
    workdir: workdir.Workdir | None
    region: str | None
    node_workdir: str | None = None  # where the code is on the nodes (the spec's: None)


def run_attempt(rt: Runtime, job: Job, jc: JobCluster, *, detach: bool = False,
                replace: bool = False, out: TextIO | None = None,
                confirm_stop: Callable[[str], bool] = lambda _job: True,
                restart: Restart | None = None,
                on_notice: jobs.OnNotice | None = None,
                spending: budget.Spending | None = None) -> JobOutcome:
    """The job started on ``jc`` (its nodes asked first, one call each) and, unless
    ``detach``, followed until it ends (``on_notice``: each spot notice meanwhile;
    ``spending``: the job's spending cap, kept while it is followed)."""
    assert job.spec.train is not None
    node_workdir = None if job.workdir else job.node_workdir or job.spec.train.workdir
    with contextlib.ExitStack() as stack:  # one SSH handshake per node in all
        jc, ready = ready_cluster(rt, stack, jc, node_workdir, lambda: jobs.open_job_cluster(
            rt, job.spec_file, job.region))
        return _run_job(rt, jc, job.spec, job.command, job.workdir, ready, detach=detach,
                        replace=replace, out=out, confirm_stop=confirm_stop,
                        restart=restart, on_notice=on_notice, spending=spending)


def _run_job(rt: Runtime, jc: JobCluster, spec: Spec, text: str,
             plan: workdir.Workdir | None, ready: Ready, *, detach: bool, replace: bool,
             out: TextIO | None, confirm_stop: Callable[[str], bool],
             restart: Restart | None = None,
             on_notice: jobs.OnNotice | None = None,
             spending: budget.Spending | None = None) -> JobOutcome:
    """``do_train`` once the nodes answered: every call on ``jc``'s open connections."""
    assert spec.train is not None
    refuse_running(rt, jc, ready, replace)
    for warning in cuda_warnings(spec, [n.instance_type for n in jc.nodes]):
        rt.warn(warning, stage=Stage.TRAIN)
    job_id = topology.new_job_id(datetime.now(), secrets.token_hex(2))
    sync = pack_workdir(rt, jc, plan, ready.home) if plan else None
    if sync is not None and sync.shared:
        sync_shared(jc, sync, job_id)
    cwd = sync.remote if sync else ready.cwd or "/"
    if spending is not None:
        spending.observe(jc)
    start(rt, jc, spec, text, job_id, cwd, ready.ports,
          sync if sync is not None and not sync.shared else None, restart,
          spending.files() if spending is not None else None)
    if restart is not None:  # the node clocks say it in the record; this one says it now
        latest = recoveries_of(restart.record, time.time())[-1:]
        for recovery in latest:
            rt.done(Stage.TRAIN, f"job {job_id} is the job restarted: {recovery.describe()}")
    if detach:
        return JobOutcome(jc.name, job_id, JobStateName.RUNNING, detached=True)
    return follow_job(jc, job_id, out, confirm_stop, on_notice, spending=spending)


def follow_job(jc: JobCluster, job_id: str, out: TextIO | None,
               confirm_stop: Callable[[str], bool], on_notice: jobs.OnNotice | None = None,
               active: bool = True, spending: budget.Spending | None = None) -> JobOutcome:
    """The job's logs until it ends (``active``; else those it has, then its state);
    Ctrl-C asks ``confirm_stop`` whether to stop it. While active, its NCCL transport
    is checked on EFA-capable nodes (``transport.py``: a job not on EFA under
    ``network.efa: true`` is stopped), and its spend kept to its cap (``spending``:
    ``cluster/jobs/budget.py``)."""
    teller = top.FindingsTeller(jc, lambda line: out.write(line + "\n")) \
        if active and out is not None else None
    watch = transport.watch_for(jc, out) if active else None
    spend = budget.watch_for(spending if active else None, jc, job_id, _sayer(out))
    try:
        outcome = _follow(jc, job_id, out, confirm_stop, on_notice, active, teller, watch)
    finally:
        spent = spend.close() if spend is not None else None
    return dataclasses.replace(outcome, budget=spent) if spent is not None else outcome


def _sayer(out: TextIO | None) -> Callable[[str], None]:
    def say(line: str) -> None:
        if out is not None:
            out.write(line + "\n")
            out.flush()
    return say


def _follow(jc: JobCluster, job_id: str, out: TextIO | None,
            confirm_stop: Callable[[str], bool], on_notice: jobs.OnNotice | None,
            active: bool, teller: top.FindingsTeller | None,
            watch: transport.TransportWatch | None) -> JobOutcome:
    """``follow_job``'s follow, its watches made."""
    try:
        printer = jobs.follow_logs(jc, job_id, keep_following=active, out=out,
                                   on_notice=on_notice,
                                   on_metrics=teller.add if teller else None,
                                   on_line=watch.add if watch else None,
                                   stop=watch.stop if watch else None)
    except KeyboardInterrupt:
        if not confirm_stop(job_id):
            return JobOutcome(jc.name, job_id, JobStateName.RUNNING, "left running (Ctrl-C)",
                              detached=True)
        # the interrupted run closed the shared connections: fresh ones of its own
        jobs.stop_job(dataclasses.replace(jc, pool=None), job_id)
        return JobOutcome(jc.name, job_id, JobStateName.STOPPED, "stopped on Ctrl-C")
    found = tuple(f.to_json() for f in teller.told.values()) if teller else ()
    if watch is not None and watch.stop_reason is not None:
        return transport.stop_off_efa(jc, job_id, watch, found)
    if not active:
        final = jobs.job_on(jobs.node_jobs(jc).get(jc.master.hop.label, []), job_id)
        if final is not None:
            printer.states["master"] = final
    found += watch.finish() if watch else ()
    return dataclasses.replace(jobs.outcome(jc, job_id, printer), findings=found)
