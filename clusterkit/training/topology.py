"""A training job's processes: spec + nodes -> one ProcessSpec per process, with its
argv and environment (DMLC_* for MXNet's parameter server, torchrun's flags, the
CLUSTERKIT_* variables every framework gets). PURE: no clock, no environment, no I/O.

Decisions (docs/howto/training.md, "The environment of each process"):
- MXNet scheduler and servers run ``<python> -c 'import mxnet'`` rather than the user's
  command (MXNet's tools/launch.py runs the user command for every role): mxnet runs the
  scheduler/server loop inside its import when DMLC_ROLE says so, so the command's own
  side effects (argument checks, data loading, GPU memory, a wrapper script's setup)
  never happen twice and a server needs nothing but mxnet. ``python`` is the nodes'
  environment (ENVS_DIR/current/bin/python) when train.packages is set, else
  train.python, so scheduler and servers import the mxnet the workers get on PATH.
- Workers (and torchrun) run the user's command text through ``bash -c`` in the workdir.
- torchrun runs as ``<python> -m torch.distributed.run`` (what the ``torchrun`` script
  is), tied to the same interpreter; see ``torchrun_target`` for how the command is split.
- ``train.env`` is applied first and clusterkit's keys on top, so a user key never
  overrides what clusterkit computes; DMLC_* and CLUSTERKIT_* keys of the user are dropped
  (``validate`` warns about them), except DMLC_INTERFACE, which the user may set.
- On nodes expected to use EFA, NCCL's start-up and network lines are turned on
  (``nccl.DEBUG_ENV``) so `train` reads which network NCCL chose; a user who set
  NCCL_DEBUG keeps theirs (and `train` reads what it prints).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import posixpath
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from clusterkit.node.jobfile import (
    Coordinator,
    JobFile,
    ProcessEntry,
    RecoveryRecord,
    Sampling,
    Stopping,
)
from clusterkit.node.jobstate import JOB_ID_RE
from clusterkit.node.paths import ENVS_DIR
from clusterkit.spec.model import Spec, Train
from clusterkit.training.nccl import DEBUG_ENV

ENV_DIR = f"{ENVS_DIR}/current"  # the venv env.sh points `current` at
# Ubuntu's /etc/environment PATH: the base the environment's bin dir is put in front of.
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
USER_SETTABLE = frozenset({"DMLC_INTERFACE"})
RESERVED_PREFIXES = ("DMLC_", "CLUSTERKIT_")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
_PYTHON_RE = re.compile(r"^python[0-9.]*$")
# Shell syntax that only `bash -c` can run (torchrun would pass it as plain arguments).
_SHELL_OPS = frozenset({"&&", "||", ";", "|", "&", ">", ">>", "<", "<<", "(", ")"})
_SHELL_CHARS = ("$", "`", "*", "?", "~", "[")
# An elastic job's c10d rendezvous: a node that left is dropped after 3 s without its
# keep-alive (1 s x 3, not 15 s), and a round that has its minimum waits 3 s more for
# the others (not 30 s) before it starts at the size it has.
RDZV_CONF = "last_call_timeout=3,keep_alive_interval=1,keep_alive_max_attempt=3"
# torch >= 2.4 shares the rendezvous store with the workers, and its rank-0 agent then
# publishes MASTER_ADDR only in the first round: a node joining a later round waits
# for it forever (torch 2.13). Not shared, rank 0 publishes it in every round.
ELASTIC_ENV = MappingProxyType({"TORCH_DISABLE_SHARE_RDZV_TCP_STORE": "1"})


class ProcRole(StrEnum):
    SCHEDULER = "scheduler"
    SERVER = "server"
    WORKER = "worker"
    TORCHRUN = "torchrun"


@dataclass(frozen=True)
class NodeSlot:
    """One node as the job sees it: its rank, in-cluster IP address and host name."""

    index: int
    address: str  # ps-lite binds zmq on DMLC_NODE_HOST: an IP, never a host name
    name: str

    def __post_init__(self) -> None:
        ipaddress.ip_address(self.address)  # ValueError when it is not an IP
        if self.index < 0 or not _NAME_RE.match(self.name):
            raise ValueError(f"node {self.index} {self.name!r}: not a valid node")


@dataclass(frozen=True)
class ProcessSpec:
    node_index: int
    name: str  # unique on its node: scheduler, server-0, worker-1, torchrun
    role: ProcRole
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    cwd: str = "/"

    def entry(self) -> ProcessEntry:
        """The process as job.json holds it."""
        return ProcessEntry(self.name, str(self.role), self.argv, self.cwd, dict(self.env))

    def plain(self) -> dict[str, Any]:
        return self.entry().to_json()


def new_job_id(now: datetime, rand: str) -> str:
    """``j-YYYYMMDD-HHMMSS-xxxx``: the caller's clock and 4 random hex digits."""
    job_id = f"j-{now:%Y%m%d-%H%M%S}-{rand}"
    if not JOB_ID_RE.match(job_id):
        raise ValueError(f"{rand!r} is not 4 lowercase hex digits")
    return job_id


def python_argv(train: Train) -> tuple[str, ...]:
    """The interpreter the job's Python runs under (split: ``python3 -u`` is allowed)."""
    if train.packages:
        return (f"{ENV_DIR}/bin/python",)
    return tuple(shlex.split(train.python)) or ("python3",)


def gpu_share(gpus: int, worker: int, workers: int) -> str:
    """``CLUSTERKIT_GPUS`` of worker ``worker`` of ``workers`` on a node with ``gpus``:
    contiguous, even shares (the first ``gpus % workers`` get one more); with more
    workers than GPUs each gets one, round robin; no GPU: ""."""
    if gpus <= 0:
        return ""
    if workers >= gpus:
        return str(worker % gpus)
    size, extra = divmod(gpus, workers)
    start = worker * size + min(worker, extra)
    return ",".join(str(g) for g in range(start, start + size + (worker < extra)))


def user_env(train: Train) -> dict[str, str]:
    """train.env without the keys clusterkit owns (validate warns about those)."""
    return {k: str(v) for k, v in train.env.items()
            if k in USER_SETTABLE or not k.startswith(RESERVED_PREFIXES)}


def _base_env(train: Train, nodes: Sequence[NodeSlot], node: NodeSlot, *, job_id: str,
              master_port: int, gpus_per_node: int) -> dict[str, str]:
    env = {"PYTHONUNBUFFERED": "1", **user_env(train)}  # live logs; the user may say 0
    if train.packages:
        env.update(PATH=f"{ENV_DIR}/bin:{SYSTEM_PATH}", VIRTUAL_ENV=ENV_DIR)
    env.update({
        "CLUSTERKIT_JOB_ID": job_id, "CLUSTERKIT_NODE_RANK": str(node.index),
        "CLUSTERKIT_NUM_NODES": str(len(nodes)),
        "CLUSTERKIT_NODE_IPS": ",".join(n.address for n in nodes),
        "CLUSTERKIT_GPUS_PER_NODE": str(gpus_per_node),
        "MASTER_ADDR": nodes[0].address, "MASTER_PORT": str(master_port),
    })
    return env


def _check(nodes: Sequence[NodeSlot], job_id: str, ports: Sequence[int], workdir: str,
           gpus_per_node: int) -> None:
    if not nodes or [n.index for n in nodes] != list(range(len(nodes))):
        raise ValueError("nodes must be indexed 0..N-1 in order")
    if len({n.address for n in nodes}) != len(nodes):
        raise ValueError("two nodes share an address")
    if not JOB_ID_RE.match(job_id):
        raise ValueError(f"{job_id!r} is not a job id")
    if any(not 0 < p < 65536 for p in ports):
        raise ValueError(f"ports {list(ports)}: each must be 1..65535")
    if not posixpath.isabs(workdir):
        raise ValueError(f"workdir {workdir!r} must be absolute (resolve ~ on the node)")
    if gpus_per_node < 0:
        raise ValueError("gpus_per_node must be >= 0")


def checkpoint_env(train: Train, restart_count: int) -> dict[str, str]:
    """The checkpoint contract's variables: which signal asks for a checkpoint, where
    checkpoints go (when the spec says), and how often the job was restarted after a
    lost node (0 on the first start)."""
    env = {"CLUSTERKIT_CHECKPOINT_SIGNAL": train.checkpoint_signal,
           "CLUSTERKIT_RESTART_COUNT": str(restart_count)}
    if train.checkpoint_dir:
        env["CLUSTERKIT_CHECKPOINT_DIR"] = train.checkpoint_dir
    return env


def nccl_debug_env(train: Train, efa_interfaces: int) -> dict[str, str]:
    """NCCL's start-up and network lines for a job whose nodes are expected to use
    ``efa_interfaces`` EFA interfaces (0: none, nothing set); nothing when the user set
    NCCL_DEBUG, and never a key the user set."""
    if efa_interfaces <= 0 or "NCCL_DEBUG" in train.env:
        return {}
    return {k: v for k, v in DEBUG_ENV.items() if k not in train.env}


def job_processes(spec: Spec, nodes: Sequence[NodeSlot], *, job_id: str, command: str,
                  port: int, rdzv_port: int, gpus_per_node: int,
                  workdir: str, restart_count: int = 0,
                  efa_interfaces: int = 0) -> tuple[ProcessSpec, ...]:
    """Every process of the job on every node, node by node. ``port``: the MXNet
    scheduler's (DMLC_PS_ROOT_PORT); ``rdzv_port``: torchrun's c10d rendezvous on the
    master; both picked by the caller and checked free on the master.
    ``efa_interfaces``: the EFA interfaces each node is expected to use (the type's,
    when the spec wants EFA; 0: none)."""
    train = spec.train
    if train is None:
        raise ValueError(f"{spec.name}: the spec has no train section")
    if not command.strip():
        raise ValueError("the training command is empty")
    _check(nodes, job_id, (port, rdzv_port), workdir, gpus_per_node)
    if train.framework == "torchrun":
        procs = [_torchrun(train, nodes, n, job_id=job_id, command=command,
                           rdzv_port=rdzv_port, gpus=gpus_per_node, cwd=workdir)
                 for n in nodes]
    else:
        procs = [p for n in nodes for p in _mxnet_node(
            train, nodes, n, job_id=job_id, command=command, port=port,
            gpus=gpus_per_node, cwd=workdir)]
    extra = {**checkpoint_env(train, restart_count), **nccl_debug_env(train, efa_interfaces)}
    return tuple(dataclasses.replace(p, env=MappingProxyType({**p.env, **extra}))
                 for p in procs)


def mxnet_workers(train: Train, gpus: int) -> int:
    """Workers per node: workers_per_node, or one per GPU when it is 0."""
    workers = train.workers_per_node or gpus
    if workers <= 0:
        raise ValueError("workers_per_node: 0 means one worker per GPU, but the nodes "
                         "have no GPU")
    return workers


def _mxnet_node(train: Train, nodes: Sequence[NodeSlot], node: NodeSlot, *, job_id: str,
                command: str, port: int, gpus: int, cwd: str) -> list[ProcessSpec]:
    workers = mxnet_workers(train, gpus)
    base = _base_env(train, nodes, node, job_id=job_id, master_port=port,
                     gpus_per_node=gpus)
    base.update({
        "DMLC_PS_ROOT_URI": nodes[0].address, "DMLC_PS_ROOT_PORT": str(port),
        "DMLC_NUM_SERVER": str(train.servers_per_node * len(nodes)),
        "DMLC_NUM_WORKER": str(workers * len(nodes)), "DMLC_NODE_HOST": node.address,
    })
    ps = (*python_argv(train), "-c", "import mxnet")
    roles = [(ProcRole.SCHEDULER, "scheduler", ps, "")] if node.index == 0 else []
    roles += [(ProcRole.SERVER, f"server-{s}", ps, "")
              for s in range(train.servers_per_node)]
    roles += [(ProcRole.WORKER, f"worker-{w}", ("bash", "-c", command),
               gpu_share(gpus, w, workers)) for w in range(workers)]
    return [ProcessSpec(node.index, name, role, argv, MappingProxyType(
        {**base, "DMLC_ROLE": str(role), "CLUSTERKIT_GPUS": share}), cwd)
        for role, name, argv, share in roles]


def torchrun_target(command: str) -> tuple[str, ...]:
    """What follows torchrun's own flags. ``python[3] script.py ARGS`` -> ``script.py
    ARGS`` (torchrun starts it with its interpreter), ``python -m mod ARGS`` ->
    ``--module mod ARGS``, ``script.py ARGS`` as is; anything else (another program,
    interpreter flags, shell syntax: pipes, ``&&``, ``$VAR``, globs) ->
    ``--no-python bash -c COMMAND``, so bash runs it once per local rank."""
    shell = ("--no-python", "bash", "-c", command)
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError as exc:
        raise ValueError(f"cannot split the command: {exc}") from exc
    if any(t in _SHELL_OPS for t in tokens) or any(c in command for c in _SHELL_CHARS):
        return shell
    if _PYTHON_RE.match(posixpath.basename(tokens[0])):
        rest = tokens[1:]
        if len(rest) >= 2 and rest[0] == "-m":
            return ("--module", *rest[1:])
        if rest and not rest[0].startswith("-"):
            return tuple(rest)
        return shell
    if tokens[0].endswith(".py"):
        return tuple(tokens)
    return ("--no-python", *tokens)


def torchrun_nproc(train: Train, gpus: int) -> int:
    """Processes per node: workers_per_node when > 0, else one per GPU (1 on CPU)."""
    return train.workers_per_node or max(gpus, 1)


def elastic_flags(train: Train, node: NodeSlot, num_nodes: int) -> tuple[str, ...]:
    """torchrun's own flags for the size of the job: ``--nnodes N --node-rank I``, or for
    an elastic job (``train.elastic``) ``--nnodes MIN:N``, ``--max-restarts`` and the
    c10d rendezvous' settings (``RDZV_CONF``; the master hosts its store, the others never
    try to): torchrun ranks the nodes of each rendezvous itself."""
    if train.elastic is None:
        return ("--nnodes", str(num_nodes), "--node-rank", str(node.index))
    conf = f"is_host={int(node.index == 0)},{RDZV_CONF}"
    return ("--nnodes", f"{train.elastic.min}:{num_nodes}",
            "--max-restarts", str(train.elastic.max_restarts), "--rdzv-conf", conf)


def _torchrun(train: Train, nodes: Sequence[NodeSlot], node: NodeSlot, *, job_id: str,
              command: str, rdzv_port: int, gpus: int, cwd: str) -> ProcessSpec:
    master = nodes[0].address
    endpoint = f"[{master}]" if ":" in master else master  # an IPv6 endpoint needs []
    argv = (*python_argv(train), "-m", "torch.distributed.run",
            *elastic_flags(train, node, len(nodes)),
            "--nproc-per-node", str(torchrun_nproc(train, gpus)),
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{endpoint}:{rdzv_port}",
            "--rdzv-id", job_id, "--local-addr", node.address,
            *torchrun_target(command))
    env = _base_env(train, nodes, node, job_id=job_id, master_port=rdzv_port,
                    gpus_per_node=gpus)
    env["CLUSTERKIT_GPUS"] = gpu_share(gpus, 0, 1)
    if train.elastic is not None:
        env.update(CLUSTERKIT_ELASTIC_MIN=str(train.elastic.min), **ELASTIC_ENV)
    return ProcessSpec(node.index, "torchrun", ProcRole.TORCHRUN, argv,
                       MappingProxyType(env), cwd)


def cgroup_name(cluster: str, node_index: int, job_id: str) -> str:
    return f"{cluster}-{node_index}-{job_id}"


def job_file(processes: Sequence[ProcessSpec], node: NodeSlot, *, cluster: str,
             job_id: str, num_nodes: int, coordinator_host: str, coordinator_port: int,
             grace_seconds: int = 10, heartbeat_timeout: float = 15,
             checkpoint_signal: str = "SIGUSR1", checkpoint_grace: float = 90.0,
             imds: str = "", recovery: RecoveryRecord | None = None,
             sampling: Mapping[str, Any] | None = None,
             block_end: float | None = None, elastic_min: int = 0) -> JobFile:
    """job.json of ``node`` (its own processes only), without the coordinator's token:
    the caller adds it (``JobFile.with_token``) and sends it over SSH stdin. ``imds``:
    the instance metadata endpoint the node's supervisor watches for a spot interruption
    notice (empty: none). ``recovery``: a restarted job's record (its first job, how
    often it was restarted and why), which the supervisor keeps in state.json.
    ``sampling``: the node's metrics sampler's settings (``sampling_of``; none: off).
    ``block_end``: the end of the Capacity Block the node runs in (epoch seconds; none:
    not in one): its supervisor treats the block's approaching end as an interruption.
    ``elastic_min``: an elastic job's fewest nodes (0: not elastic): a node other than
    the master that gets a notice leaves the job instead of stopping it."""
    mine = tuple(p.entry() for p in processes if p.node_index == node.index)
    if not mine:
        raise ValueError(f"node {node.index} has no process in this job")
    return JobFile(
        job_id=job_id, node_index=node.index, node_name=node.name,
        cgroup_name=cgroup_name(cluster, node.index, job_id), is_master=node.index == 0,
        coordinator=Coordinator(coordinator_host, coordinator_port, "", num_nodes,
                                heartbeat_timeout),
        stopping=Stopping(grace_seconds, checkpoint_signal, checkpoint_grace), imds=imds,
        block_end=block_end, recovery=recovery or RecoveryRecord(),
        sampling=Sampling(**sampling) if sampling is not None else None, processes=mine,
        elastic_min=elastic_min)


def sampling_of(spec: Spec, gpus: int = 0) -> dict[str, Any]:
    """What each node's sampler needs (``node/sampler.py``): how often, the user's
    throughput pattern, and the dataset volume's mount (its device's I/O is sampled);
    the stall watch's settings; and its GPU health watch's (``gpuwatch``): how often,
    and ``gpus``, how many GPUs the node's type has."""
    train = spec.train
    dataset = spec.storage.dataset
    return {"interval": train.sample_interval if train else 2.0,
            "throughput_pattern": train.throughput_pattern if train else None,
            "dataset_mount": dataset.mount if dataset is not None else None,
            "stall_after": train.stall_after if train else 600.0,
            "stop_on_stall": train.stop_on_stall if train else False,
            "health_every": train.gpu_health_every if train else 60.0, "gpus": gpus}
