"""job.json: what one node's supervisor runs, as one typed record. Stdlib only, Python
>= 3.8, PURE but for ``read`` (no clock, no environment, no file written).

The client builds a ``JobFile`` per node (``training.topology.job_file``, the
coordinator's token included) and sends ``to_json`` into the job dir (``write_text``);
the supervisor and the follower read it back (``read``). Nothing else names the file.
Its ``recovery`` (a restarted job's record: its first job, every recovery so far, the
training command) is a ``RecoveryRecord``, carried into state.json unchanged.

Shipped beside the supervisor (``bundle.SUPERVISOR``), sent ahead of the follower
(``bundle.FOLLOWER``), imported by the client as ``clusterkit.node.jobfile``.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

try:  # imported as clusterkit.node.jobfile (the client, tests)
    from . import wire
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import wire

NAME = "job.json"


def path_in(job_dir: str) -> str:
    return os.path.join(job_dir, NAME)


@dataclass(frozen=True)
class RecoveryRecord:
    """A job's recoveries (``plan.recovery.job_record`` builds it): the job it restarts
    (itself, first), every recovery so far (``plan.recovery.Recovery.to_json`` each: the
    nodes carry them, only the client reads them) and the training command, with which
    `train --attach` starts it again. Empty (``first_job`` ""): a job started before
    records were kept."""

    KIND = "recovery record"
    VERSION = 1
    first_job: str = ""
    restart_count: int = 0
    recoveries: tuple[Mapping, ...] = ()
    command: str = ""

    def to_json(self) -> dict:
        return wire.stamped(self.VERSION, {
            "first_job": self.first_job, "restart_count": self.restart_count,
            "recoveries": [dict(r) for r in self.recoveries], "command": self.command})

    @classmethod
    def from_json(cls, data: object, where: str) -> RecoveryRecord:
        data = wire.version_of({} if data is None else data, cls.KIND, cls.VERSION, where)
        return cls(first_job=wire.as_str(data.get("first_job"), "") or "",
                   restart_count=wire.as_int(data.get("restart_count"), 0) or 0,
                   recoveries=tuple(r for r in wire.as_list(data.get("recoveries"))
                                    if isinstance(r, dict)),
                   command=wire.as_str(data.get("command"), "") or "")


@dataclass(frozen=True)
class ProcessEntry:
    """One process of the node: what its supervisor starts, as job.json holds it."""

    name: str
    role: str = "worker"
    argv: tuple[str, ...] = ()
    cwd: str = "/"
    env: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "role": self.role, "argv": list(self.argv),
                "cwd": self.cwd, "env": dict(self.env)}

    @classmethod
    def from_json(cls, data: object) -> ProcessEntry:
        data = data if isinstance(data, dict) else {}
        env = wire.as_dict(data.get("env")) or {}
        return cls(name=wire.as_str(data.get("name"), "") or "",
                   role=wire.as_str(data.get("role"), "worker") or "worker",
                   argv=tuple(str(a) for a in wire.as_list(data.get("argv"))),
                   cwd=wire.as_str(data.get("cwd"), "") or "/",
                   env={str(k): str(v) for k, v in env.items()})


@dataclass(frozen=True)
class Sampling:
    """The node's metrics sampler, stall watch and GPU health watch (``sampler``,
    ``stall``, ``gpuwatch``); a watch with no period (None or 0) is off."""

    interval: float = 2.0
    throughput_pattern: str | None = None
    dataset_mount: str | None = None
    stall_after: float | None = None
    stop_on_stall: bool = False
    health_every: float | None = None
    gpus: int = 0

    def to_json(self) -> dict:
        return {"interval": self.interval, "throughput_pattern": self.throughput_pattern,
                "dataset_mount": self.dataset_mount, "stall_after": self.stall_after,
                "stop_on_stall": self.stop_on_stall, "health_every": self.health_every,
                "gpus": self.gpus}

    @classmethod
    def from_json(cls, data: object) -> Sampling | None:
        if not isinstance(data, dict):
            return None
        return cls(interval=wire.as_float(data.get("interval")) or 2.0,
                   throughput_pattern=wire.as_str(data.get("throughput_pattern")),
                   dataset_mount=wire.as_str(data.get("dataset_mount")),
                   stall_after=wire.as_float(data.get("stall_after")),
                   stop_on_stall=data.get("stop_on_stall") is True,
                   health_every=wire.as_float(data.get("health_every")),
                   gpus=wire.as_int(data.get("gpus"), 0) or 0)


@dataclass(frozen=True)
class Coordinator:
    """Where the master's supervisor listens, the job's token (the client adds it last,
    ``with_token``: it never shows in anything printed), how many nodes take part, and
    how long a silent one is waited for."""

    host: str = "127.0.0.1"
    port: int = 0
    token: str = ""
    num_nodes: int = 1
    heartbeat_timeout: float = 15.0


@dataclass(frozen=True)
class Stopping:
    """How the node's processes are stopped: the grace between SIGTERM and SIGKILL, and
    the signal (and its grace) that asks them to checkpoint first."""

    grace_seconds: float = 10.0
    checkpoint_signal: str = "SIGUSR1"
    checkpoint_grace: float = 90.0


@dataclass(frozen=True)
class JobFile:
    """job.json of one node (its own processes only). ``imds``: the instance metadata
    endpoint its supervisor watches for interruption notices (empty: none);
    ``block_end``: the end of the Capacity Block the node runs in (epoch seconds);
    ``efa_profile``: another file for the node's EFA settings (None: the node's)."""

    KIND = "job file"
    VERSION = 1
    job_id: str
    node_index: int = 0
    node_name: str = ""
    cgroup_name: str = ""
    is_master: bool = False
    coordinator: Coordinator = Coordinator()
    stopping: Stopping = Stopping()
    imds: str = ""
    block_end: float | None = None
    efa_profile: str | None = None
    recovery: RecoveryRecord = RecoveryRecord()
    sampling: Sampling | None = None
    processes: tuple[ProcessEntry, ...] = ()
    elastic_min: int = 0  # an elastic job's fewest nodes (train.elastic.min); 0: not elastic

    def to_json(self) -> dict:
        c, s = self.coordinator, self.stopping
        coordinator = {"host": c.host, "port": c.port}
        coordinator.update({"token": c.token} if c.token else {})
        optional = {"block_end": self.block_end, "efa_profile": self.efa_profile,
                    "elastic_min": self.elastic_min or None}
        return wire.stamped(self.VERSION, {
            "job_id": self.job_id, "node_index": self.node_index, "node_name": self.node_name,
            "cgroup_name": self.cgroup_name, "coordinator": coordinator,
            "is_master": self.is_master, "num_nodes": c.num_nodes,
            "grace_seconds": s.grace_seconds, "heartbeat_timeout": c.heartbeat_timeout,
            "checkpoint_signal": s.checkpoint_signal, "checkpoint_grace": s.checkpoint_grace,
            "imds": self.imds, "recovery": self.recovery.to_json(),
            "sampling": self.sampling.to_json() if self.sampling is not None else None,
            "processes": [p.to_json() for p in self.processes],
            **{k: v for k, v in optional.items() if v is not None}})

    @classmethod
    def from_json(cls, data: object, where: str) -> JobFile:
        data = wire.version_of(data, cls.KIND, cls.VERSION, where)
        coord = wire.as_dict(data.get("coordinator")) or {}
        return cls(
            job_id=wire.as_str(data.get("job_id"), "") or "",
            node_index=wire.as_int(data.get("node_index"), 0) or 0,
            node_name=wire.as_str(data.get("node_name"), "") or "",
            cgroup_name=wire.as_str(data.get("cgroup_name"), "") or "",
            is_master=data.get("is_master") is True,
            coordinator=Coordinator(
                host=wire.as_str(coord.get("host"), "127.0.0.1") or "127.0.0.1",
                port=wire.as_int(coord.get("port"), 0) or 0,
                token=wire.as_str(coord.get("token"), "") or "",
                num_nodes=wire.as_int(data.get("num_nodes"), 1) or 1,
                heartbeat_timeout=_number(data, "heartbeat_timeout", 15.0)),
            stopping=Stopping(
                grace_seconds=_number(data, "grace_seconds", 10.0),
                checkpoint_signal=wire.as_str(data.get("checkpoint_signal")) or "SIGUSR1",
                checkpoint_grace=_number(data, "checkpoint_grace", 90.0)),
            imds=wire.as_str(data.get("imds"), "") or "",
            block_end=wire.as_float(data.get("block_end")),
            efa_profile=wire.as_str(data.get("efa_profile")) or None,
            recovery=RecoveryRecord.from_json(data.get("recovery"), f"{where} (recovery)"),
            sampling=Sampling.from_json(data.get("sampling")),
            processes=tuple(ProcessEntry.from_json(p)
                            for p in wire.as_list(data.get("processes"))),
            elastic_min=wire.as_int(data.get("elastic_min"), 0) or 0)

    def with_token(self, token: str) -> JobFile:
        """The same job file with the coordinator's token (the client's last step)."""
        coordinator = Coordinator(self.coordinator.host, self.coordinator.port, token,
                                  self.coordinator.num_nodes,
                                  self.coordinator.heartbeat_timeout)
        return dataclasses.replace(self, coordinator=coordinator)

    def text(self) -> str:
        """As the client sends it into the job dir (mode 0600: it holds the token)."""
        return json.dumps(self.to_json(), indent=1)


def _number(data: dict, key: str, default: float) -> float:
    found = wire.as_float(data.get(key))
    return default if found is None else found


def read(job_dir: str, where: str = "") -> JobFile | None:
    """The job dir's job.json; None when it is missing or not JSON; WireError when it is
    of a newer schema than this program's."""
    try:
        with open(path_in(job_dir)) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return JobFile.from_json(data, f"{where}{': ' if where else ''}{path_in(job_dir)}")


def archive_entry(job: JobFile) -> tuple:
    """(name, bytes, mode) of job.json in the tar the client sends into the job dir."""
    return (NAME, job.text().encode(), 0o600)
