"""Job topology as data: every training_topology/*.json gives spec overrides (merged into
BASE_SPEC, whose train section is BASE_TRAIN; a null removes a key), the nodes (a list of
[address, name]; default: NODES), the arguments of ``job_processes`` (merged into ARGS)
and either the expected processes or an ``exception`` (its type name) and ``match``.
Expected processes are written as ``env`` (the keys every process has) plus, per process,
``node``, ``name``, ``role``, ``argv``, ``cwd`` (default ARGS' workdir) and ``env`` (keys
of that process only): each process's environment must be exactly their union."""

from __future__ import annotations

import builtins
import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterkit.node.jobfile import RecoveryRecord
from clusterkit.spec import checks, loads
from clusterkit.training import topology as topo
from tests.support import merge

HERE = Path(__file__).parent
CASES = sorted((HERE / "training_topology").glob("*.json"))
BASE_SPEC: dict[str, Any] = {
    "name": "demo", "region": "us-east-1",
    "nodes": {"count": 2, "instance_types": ["c5.large"]},
    "train": {"framework": "mxnet", "command": "python3 train.py --kv-store dist_sync"},
}
NODES = [["10.0.1.5", "deeplearning-master"], ["10.0.1.6", "deeplearning-worker1"]]
ARGS: dict[str, Any] = {"job_id": "j-20250101-120000-ab12", "port": 9091,
                        "rdzv_port": 29400, "gpus_per_node": 0, "workdir": "/efs/work"}


def processes(case: dict[str, Any]) -> tuple[topo.ProcessSpec, ...]:
    spec = loads(yaml.safe_dump(merge(BASE_SPEC, case.get("spec", {}))))
    nodes = [topo.NodeSlot(i, a, n) for i, (a, n) in enumerate(case.get("nodes", NODES))]
    args = {**ARGS, **case.get("args", {})}
    assert spec.train is not None
    command = args.pop("command", spec.train.command)
    return topo.job_processes(spec, nodes, command=command, **args)


def expected(case: dict[str, Any]) -> list[dict[str, Any]]:
    common = case["expect"]["env"]
    workdir = {**ARGS, **case.get("args", {})}["workdir"]
    return [{"node": p["node"], "name": p["name"], "role": p["role"], "argv": p["argv"],
             "cwd": p.get("cwd", workdir), "env": {**common, **p["env"]}}
            for p in case["expect"]["processes"]]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_job_processes_as_expected(path: Path):
    case = json.loads(path.read_text())
    if "exception" in case:
        with pytest.raises(getattr(builtins, case["exception"]),
                           match=case["match"]):
            processes(case)
        return
    got = [{"node": p.node_index, **p.plain()} for p in processes(case)]
    assert got == expected(case)


def test_cases_cover_the_brief():
    names = {p.stem for p in CASES}
    for want in ("mxnet-2-nodes", "mxnet-3-nodes", "mxnet-p4d-8-gpus", "torchrun-cpu",
                 "torchrun-gpu", "train-env"):
        assert any(n.startswith(want) for n in names), want


def test_process_names_are_unique_per_node_and_roles_add_up():
    case = json.loads((HERE / "training_topology" / "mxnet-3-nodes.json").read_text())
    procs = processes(case)
    by_node: dict[int, list[str]] = {}
    for p in procs:
        by_node.setdefault(p.node_index, []).append(p.name)
    assert all(len(set(v)) == len(v) for v in by_node.values())
    roles = [p.role for p in procs]
    env = procs[0].env
    assert roles.count(topo.ProcRole.SCHEDULER) == 1
    assert roles.count(topo.ProcRole.SERVER) == int(env["DMLC_NUM_SERVER"])
    assert roles.count(topo.ProcRole.WORKER) == int(env["DMLC_NUM_WORKER"])


def test_new_job_id_format_and_refusals():
    job = topo.new_job_id(datetime(2025, 3, 7, 9, 5, 1), "0f3a")
    assert job == "j-20250307-090501-0f3a" and topo.JOB_ID_RE.match(job)
    for bad in ("0F3A", "0f3", "0f3ab", "zzzz", "../x"):
        with pytest.raises(ValueError):
            topo.new_job_id(datetime(2025, 3, 7), bad)


@pytest.mark.parametrize(("gpus", "workers", "shares"), [
    (0, 2, ["", ""]), (8, 1, ["0,1,2,3,4,5,6,7"]), (8, 2, ["0,1,2,3", "4,5,6,7"]),
    (8, 3, ["0,1,2", "3,4,5", "6,7"]), (4, 4, ["0", "1", "2", "3"]),
    (2, 3, ["0", "1", "0"])])
def test_gpu_share_splits_evenly(gpus: int, workers: int, shares: list[str]):
    assert [topo.gpu_share(gpus, w, workers) for w in range(workers)] == shares


@pytest.mark.parametrize(("command", "target"), [
    ("python3 train.py --epochs 10", ["train.py", "--epochs", "10"]),
    ("/usr/bin/python3.11 'my script.py' --x 'a b'", ["my script.py", "--x", "a b"]),
    ("python -m pkg.train --lr 0.1", ["--module", "pkg.train", "--lr", "0.1"]),
    ("train.py --lr 0.1", ["train.py", "--lr", "0.1"]),
    ("./run_train --lr 0.1", ["--no-python", "./run_train", "--lr", "0.1"]),
    ("python3 -u train.py", ["--no-python", "bash", "-c", "python3 -u train.py"]),
    ("cd src && python3 train.py", ["--no-python", "bash", "-c",
                                    "cd src && python3 train.py"]),
    ("python3 train.py --rank $LOCAL_RANK", ["--no-python", "bash", "-c",
                                             "python3 train.py --rank $LOCAL_RANK"]),
    ("python3 train.py>log", ["--no-python", "bash", "-c", "python3 train.py>log"]),
])
def test_torchrun_target_splits_the_command(command: str, target: list[str]):
    assert list(topo.torchrun_target(command)) == target


def test_torchrun_target_refuses_unbalanced_quotes():
    with pytest.raises(ValueError, match="cannot split"):
        topo.torchrun_target("python3 train.py --name 'oops")


def test_node_slot_wants_an_ip_and_a_plain_name():
    with pytest.raises(ValueError):
        topo.NodeSlot(0, "deeplearning-master", "deeplearning-master")
    with pytest.raises(ValueError):
        topo.NodeSlot(0, "10.0.0.1", "bad name; rm -rf /")


def job_file_case() -> tuple[tuple[topo.ProcessSpec, ...], list[topo.NodeSlot]]:
    case = json.loads((HERE / "training_topology" / "mxnet-2-nodes.json").read_text())
    return processes(case), [topo.NodeSlot(i, a, n) for i, (a, n) in enumerate(NODES)]


def test_job_file_holds_one_nodes_processes_and_no_token():
    procs, nodes = job_file_case()
    job = topo.job_file(procs, nodes[1], cluster="demo", job_id=ARGS["job_id"],
                        num_nodes=2, coordinator_host="10.0.1.5", coordinator_port=9092)
    assert job.to_json() == {
        "v": 1, "job_id": ARGS["job_id"], "node_index": 1,
        "node_name": "deeplearning-worker1", "cgroup_name": f"demo-1-{ARGS['job_id']}",
        "coordinator": {"host": "10.0.1.5", "port": 9092}, "is_master": False,
        "num_nodes": 2, "grace_seconds": 10, "heartbeat_timeout": 15,
        "checkpoint_signal": "SIGUSR1", "checkpoint_grace": 90.0, "imds": "",
        "recovery": RecoveryRecord().to_json(), "sampling": None,
        "processes": [p.plain() for p in procs if p.node_index == 1]}
    assert [p.name for p in job.processes] == ["server-0", "worker-0"]
    master = topo.job_file(procs, nodes[0], cluster="demo", job_id=ARGS["job_id"],
                           num_nodes=2, coordinator_host="10.0.1.5", coordinator_port=9092)
    assert master.is_master and master.processes[0].name == "scheduler"
    json.dumps(master.to_json())  # serializable as is


def test_job_file_carries_a_restarted_jobs_recovery_record():
    procs, nodes = job_file_case()
    record = RecoveryRecord("j-20250101-110000-ab12", 1,
                            ({"number": 1, "reason": "notice", "nodes": ["worker-1"]},))
    job = topo.job_file(procs, nodes[0], cluster="demo", job_id=ARGS["job_id"],
                        num_nodes=2, coordinator_host="10.0.1.5", coordinator_port=9092,
                        heartbeat_timeout=60, recovery=record)
    assert job.recovery == record and job.to_json()["recovery"] == record.to_json()
    assert job.coordinator.heartbeat_timeout == 60


def test_job_file_refuses_a_node_without_processes():
    procs, _ = job_file_case()
    with pytest.raises(ValueError, match="no process"):
        topo.job_file(procs, topo.NodeSlot(5, "10.0.1.9", "deeplearning-worker5"),
                      cluster="demo", job_id=ARGS["job_id"], num_nodes=2,
                      coordinator_host="10.0.1.5", coordinator_port=9092)


def test_a_secret_in_train_env_reaches_the_environment_never_the_argv():
    case = json.loads((HERE / "training_topology" / "train-env-user-keys.json").read_text())
    secret = case["spec"]["train"]["env"]["WANDB_API_KEY"]
    for p in processes(case):
        assert p.env["WANDB_API_KEY"] == secret
        assert not any(secret in a for a in p.argv), p.name


def test_validate_warns_about_exactly_the_env_keys_clusterkit_drops_or_sets():
    env = {"DMLC_INTERFACE": "ens5", "PS_VERBOSE": "1", "NCCL_DEBUG": "WARN",
           "DMLC_ROLE": "bogus", "CLUSTERKIT_GPUS": "7", "MASTER_PORT": "1"}
    text = yaml.safe_dump(merge(BASE_SPEC, {"train": {"env": env}}))
    spec, issues = checks(text)
    assert spec is not None
    warned = {i.path.removeprefix("train.env.") for i in issues if i.path.startswith("train.env")}
    assert warned == {"DMLC_ROLE", "CLUSTERKIT_GPUS", "MASTER_PORT"}
    for p in processes({"spec": {"train": {"env": env}}}):
        for key, value in env.items():
            assert (p.env.get(key) == value) == (key not in warned), (p.name, key)


def test_the_samplers_settings_come_from_the_train_section_and_the_dataset():
    from clusterkit.spec import loads

    spec = loads("name: t\nregion: us-east-1\nnodes: {count: 2, instance_types: [c5.large]}\n"
                 "storage: {dataset: {snapshot: snap-0123456789abcdef0, mount: /data}}\n"
                 "train: {command: x, sample_interval: 5, throughput_pattern: 'ips=([0-9.]+)',"
                 " stall_after: 120, stop_on_stall: true, gpu_health_every: 30}\n")
    assert topo.sampling_of(spec, gpus=8) == {
        "interval": 5, "throughput_pattern": "ips=([0-9.]+)", "dataset_mount": "/data",
        "stall_after": 120, "stop_on_stall": True, "health_every": 30, "gpus": 8}
