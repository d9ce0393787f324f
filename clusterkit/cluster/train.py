"""`clusterkit train`: one job on every node of a running cluster.

1. the cluster from its spec (running nodes, host keys checked); refuse while a job is
   active on any node (``replace``: stop it first), so a stale server never meets a new
   scheduler;
2. CUDA warnings of the spec's packages against the instance type;
3. the workdir synced (``cluster/workdir.py``);
4. ports picked on the master and checked free there (bind test), per job;
5. every node's job.json (0600) and the supervisor's files (``jobfiles.node_files``)
   sent as one tar over SSH stdin into the job dir, and the node's supervisor started,
   every node at once;
6. unless ``detach``, every log streamed live until the job ends (``cluster/jobs.py``).
"""

from __future__ import annotations

import dataclasses
import io
import json
import secrets
import shlex
import tarfile
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import TextIO

from clusterkit.bootstrap.steps import host_names
from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster import jobs, workdir
from clusterkit.cluster.jobs import JobCluster, JobOutcome, job_dir, node_python
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, RemoteError, UsageError
from clusterkit.events import Stage
from clusterkit.remote.address import ssh_address
from clusterkit.remote.channels import Call
from clusterkit.remote.fanout import Connections
from clusterkit.spec.model import Spec
from clusterkit.training import jobfiles, topology

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


def refuse_running(rt: Runtime, jc: JobCluster, replace: bool) -> None:
    running = jobs.active_jobs(jobs.node_jobs(jc))
    if running and not replace:
        raise ClusterkitError(
            f"job {', '.join(running)} is running on cluster {jc.name}",
            f"wait for it (`clusterkit logs {jc.name} -f`), stop it (`clusterkit stop "
            f"{jc.name}`), or start with --replace to stop it first")
    for job_id in running:
        rt.info(f"stopping job {job_id} (--replace)", stage=Stage.TRAIN)
        jobs.stop_job(jc, job_id)


def sync(rt: Runtime, jc: JobCluster, plan: workdir.Workdir, job_id: str) -> str:
    """Send the workdir; its absolute path on the nodes."""
    names = workdir.files(plan.local)
    data = workdir.pack(plan.local, names)
    chosen = [jc.master] if plan.shared else jc.targets
    rt.started(Stage.TRAIN, f"syncing {len(names)} file(s) ({len(data) >> 10} KiB) from "
               f"{plan.local} to {plan.remote} on "
               f"{'the EFS (through the master)' if plan.shared else f'{len(chosen)} node(s)'}")
    call = Call(workdir.extract_command(plan.remote, job_id), data)
    group = jc.run(chosen, {t.hop.label: call for t in chosen}, timeout=600)
    return group[chosen[0].hop.label].stdout.strip().splitlines()[-1]


def master_ports(jc: JobCluster, node_workdir: str | None) -> tuple[list[int], str | None]:
    """PORTS free ports on the master (bind test there) and, when the command runs in a
    directory of the nodes, its absolute path (``~`` resolved there)."""
    command = jobs.follower_call("ports", str(PORTS))
    if node_workdir is not None:
        where = node_workdir
        if where == "~" or where.startswith("~/"):
            where = '"$HOME"' + shlex.quote(where[1:]) if len(where) > 1 else '"$HOME"'
        else:
            where = shlex.quote(where)
        command = Call(f"{command.command} && cd -- {where} && pwd", command.stdin)
    result = jc.run([jc.master], {jc.master.hop.label: command},
                    timeout=60)[jc.master.hop.label]
    lines = result.stdout.splitlines()
    return [int(p) for p in lines[0].split()], (lines[1].strip() if node_workdir else None)


def node_slots(jc: JobCluster) -> list[topology.NodeSlot]:
    """The nodes as the job sees them: the in-cluster address (what the master dials)."""
    return [topology.NodeSlot(t.node.index or 0, ssh_address(t.node, via_gateway=True),
                              host_names(jc.name, t.node.index or 0)[0])
            for t in jc.targets]


def job_archive(job: dict, files: Mapping[str, str]) -> bytes:
    """job.json (0600) and the supervisor's files (0700) as a tar for the node's stdin."""
    buf = io.BytesIO()
    entries = [("job.json", json.dumps(job, indent=1), 0o600)]
    entries += [(name, text, 0o700) for name, text in sorted(files.items())]
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, text, mode in entries:
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def start_command(job_id: str) -> str:
    d = shlex.quote(job_dir(job_id))
    return (f"set -e; umask 077; {_JOBS_READY}; mkdir -m 0700 {d}; "
            f"tar -x -C {d} --no-same-owner; "
            f"{node_python()} {d}/supervisor.py start {d}")


def cuda_warnings(spec: Spec, instance_types: Sequence[str]) -> list[str]:
    """validate's CUDA warnings for the instance types the cluster actually runs."""
    from clusterkit.spec.checks import cuda_warnings as warnings

    return list(dict.fromkeys(w for t in dict.fromkeys(instance_types)
                              for w in warnings(spec, t)))


def start(rt: Runtime, jc: JobCluster, spec: Spec, command: str, job_id: str,
          cwd: str, ports: Sequence[int]) -> None:
    """Every node's job files and supervisor, all nodes at once."""
    slots = node_slots(jc)
    itype = instance_type(jc.nodes[0].instance_type)
    gpus = itype.gpu_count if itype else 0
    try:
        procs = topology.job_processes(spec, slots, job_id=job_id, command=command,
                                       port=ports[0], rdzv_port=ports[1],
                                       gpus_per_node=gpus, workdir=cwd)
    except ValueError as exc:
        raise UsageError(f"{spec.file}: {exc}", "check the train section") from exc
    token, files = secrets.token_hex(16), jobfiles.node_files()
    calls = {}
    for target, slot in zip(jc.targets, slots, strict=True):
        job = topology.job_file(procs, slot, cluster=jc.name, job_id=job_id,
                                num_nodes=len(slots), coordinator_host=slots[0].address,
                                coordinator_port=ports[2])
        job["coordinator"]["token"] = token
        calls[target.hop.label] = Call(start_command(job_id), job_archive(job, files))
    rt.started(Stage.TRAIN, f"starting job {job_id}: {len(procs)} process(es) on "
               f"{len(slots)} node(s)")
    jc.run(jc.targets, calls, timeout=120)
    rt.done(Stage.TRAIN, f"job {job_id} started on {len(slots)} node(s)")


def do_train(spec_file: str, *, command: Sequence[str] = (), workdir_option: str | None = None,
             detach: bool = False, replace: bool = False, out: TextIO | None = None,
             confirm_stop: Callable[[str], bool] = lambda _job: True,
             region: str | None = None, profile: str | None = None,
             rt: Runtime | None = None) -> JobOutcome:
    """Start the spec's job on every node of its running cluster; unless ``detach``,
    stream every log to ``out`` until it ends. On Ctrl-C, ``confirm_stop(job_id)``
    decides whether the job is stopped (True) or left running."""
    rt = rt or Runtime.make(region=region, profile=profile)
    jc = jobs.open_cluster(rt, spec_file, region)
    spec = jc.spec
    if spec is None or spec.train is None:
        raise UsageError(f"{spec_file}: no train section", "add `train:` to the spec")
    text = training_command(spec, command)
    plan = workdir.plan(spec, workdir_option)
    with Connections(jc.login, jc.targets) as pool:  # one SSH handshake per node in all
        return _run_job(rt, dataclasses.replace(jc, pool=pool), spec, text, plan,
                        detach=detach, replace=replace, out=out, confirm_stop=confirm_stop)


def _run_job(rt: Runtime, jc: JobCluster, spec: Spec, text: str,
             plan: workdir.Workdir | None, *, detach: bool, replace: bool,
             out: TextIO | None, confirm_stop: Callable[[str], bool]) -> JobOutcome:
    """``do_train`` once the cluster is found: every call on ``jc``'s open connections."""
    assert spec.train is not None
    refuse_running(rt, jc, replace)
    for warning in cuda_warnings(spec, [n.instance_type for n in jc.nodes]):
        rt.warn(warning, stage=Stage.TRAIN)
    job_id = topology.new_job_id(datetime.now(), secrets.token_hex(2))
    cwd = sync(rt, jc, plan, job_id) if plan else None
    ports, node_cwd = master_ports(jc, None if plan else spec.train.workdir)
    if len(ports) < PORTS:
        raise RemoteError(f"no {PORTS} free ports on the master", "is the master busy?")
    start(rt, jc, spec, text, job_id, cwd or node_cwd or "/", ports)
    if detach:
        return JobOutcome(jc.name, job_id, "running", detached=True)
    try:
        printer = jobs.follow_logs(jc, job_id, keep_following=True, out=out)
    except KeyboardInterrupt:
        if not confirm_stop(job_id):
            return JobOutcome(jc.name, job_id, "running", "left running (Ctrl-C)",
                              detached=True)
        # the interrupted run closed the shared connections: fresh ones of its own
        jobs.stop_job(dataclasses.replace(jc, pool=None), job_id)
        return JobOutcome(jc.name, job_id, "stopped", "stopped on Ctrl-C")
    return jobs.outcome(jc, job_id, printer)
