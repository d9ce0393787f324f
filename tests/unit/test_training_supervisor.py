"""The supervisor's pure helpers and the client's view of a job (jobfiles): no daemon,
no cgroup, no root. The program runs on nodes with their own python3, so it must stay
stdlib-only and parse as Python 3.8."""

from __future__ import annotations

import ast
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.training import jobfiles
from clusterkit.training import supervisor as sup

JOB_ID = "j-20250101-120000-ab12"
HYBRID_MOUNTINFO = """\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
"""


def test_the_program_parses_as_python_3_8_and_imports_only_the_stdlib() -> None:
    source = jobfiles.supervisor_source()
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    assert imported <= set(sys.stdlib_module_names)  # so no clusterkit import either


def test_cgroup2_mount_is_found_in_mountinfo() -> None:
    assert sup.cgroup2_mount(HYBRID_MOUNTINFO) == "/sys/fs/cgroup/unified"
    assert sup.cgroup2_mount(HYBRID_MOUNTINFO.replace("cgroup2 cgroup2", "cgroup x")) is None
    systemd = "25 1 0:23 / /sys/fs/cgroup rw,nosuid shared:9 - cgroup2 cgroup2 rw\n"
    assert sup.cgroup2_mount(systemd) == "/sys/fs/cgroup"


def test_process_env_is_minimal_plus_the_job_keys() -> None:
    base = {"PATH": "/bin", "HOME": "/home/u", "AWS_SECRET_ACCESS_KEY": "x", "TERM": "y"}
    env = sup.process_env(base, {"DMLC_ROLE": "worker", "N": 3}, JOB_ID)
    assert env == {"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
                   "DMLC_ROLE": "worker", "N": "3", "CLUSTERKIT_JOB_ID": JOB_ID}
    assert sup.process_env({}, {"CLUSTERKIT_JOB_ID": "other"}, JOB_ID)["CLUSTERKIT_JOB_ID"] \
        == JOB_ID
    assert sup.process_env({}, {}, JOB_ID)["PATH"] == sup.DEFAULT_PATH


def _procs(*items: tuple[str, str, int | None]) -> dict:
    return {name: {"role": role, "exit": code, "state": "running" if code is None else "exited"}
            for name, role, code in items}


def test_decide_outcome_fails_on_the_first_non_zero_exit() -> None:
    nodes = {0: _procs(("scheduler", "scheduler", None), ("worker-0", "worker", None)),
             1: _procs(("server-0", "server", None), ("worker-0", "worker", 3))}
    assert sup.decide_outcome(nodes, 2) == (
        "failed", "node 1 worker-0 exited with 3",
        {"node": 1, "process": "worker-0", "exit": 3})
    nodes[0]["scheduler"]["exit"] = -9  # a killed scheduler fails the job too
    assert sup.decide_outcome(nodes, 2)[2] == {"node": 0, "process": "scheduler", "exit": -9}


def test_decide_outcome_succeeds_only_when_every_node_reported_and_workers_exited_0() -> None:
    done = {0: _procs(("server-0", "server", None), ("worker-0", "worker", 0))}
    assert sup.decide_outcome(done, 2) is None  # node 1 not heard from yet
    done[1] = _procs(("torchrun", "torchrun", None))
    assert sup.decide_outcome(done, 2) is None
    done[1]["torchrun"]["exit"] = 0
    assert sup.decide_outcome(done, 2)[0] == "succeeded"
    assert sup.decide_outcome({0: _procs(("scheduler", "scheduler", None))}, 1) is None


def _job_dir(tmp_path: Path, **overrides: object) -> str:
    d = tmp_path / JOB_ID
    d.mkdir(exist_ok=True)
    job = {"job_id": JOB_ID, "cgroup_name": f"c1-0-{JOB_ID}", "processes": [
        {"name": "worker-0", "role": "worker", "argv": ["true"]}], **overrides}
    (d / "job.json").write_text(json.dumps(job))
    return str(d)


@pytest.mark.parametrize("overrides", [
    {"job_id": "j-20250101-120000-ab13"},  # not this dir's
    {"cgroup_name": "../escape"},
    {"processes": [{"name": "../x", "argv": ["true"]}]},
    {"processes": [{"name": "w", "argv": ["true"]}, {"name": "w", "argv": ["true"]}]},
])
def test_load_job_refuses_names_that_could_leave_their_directory(tmp_path, overrides) -> None:
    with pytest.raises(ValueError):
        sup.load_job(_job_dir(tmp_path, **overrides))


def test_load_job_accepts_a_good_job(tmp_path: Path) -> None:
    assert sup.load_job(_job_dir(tmp_path))["job_id"] == JOB_ID
    with pytest.raises(ValueError, match="no readable job.json"):
        sup.load_job(str(tmp_path))


def test_write_json_is_private_and_atomic(tmp_path: Path) -> None:
    path = str(tmp_path / "state.json")
    sup.write_json(path, {"a": 1})
    assert json.loads(Path(path).read_text()) == {"a": 1}
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["state.json"]


def test_link_reads_whole_lines_and_drops_garbage() -> None:
    a, b = socket.socketpair()
    link = sup.Link(b)
    a.sendall(b'{"t": "hb"}\n{"t": "pr')
    assert link.read() == [{"t": "hb"}]
    a.sendall(b'ocs"}\n')
    assert link.read() == [{"t": "procs"}]
    a.sendall(b"not json\n")
    assert link.read() is None
    a.close()
    assert sup.Link(b).read() is None  # peer gone
    b.close()


def test_scan_proc_finds_a_process_by_its_job_id_and_by_its_group() -> None:
    env = {"PATH": os.environ["PATH"], "CLUSTERKIT_JOB_ID": JOB_ID}
    by_env = subprocess.Popen(["sleep", "30"], env=env)
    by_group = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        found = sup.scan_proc({by_group.pid}, JOB_ID)
        assert {by_env.pid, by_group.pid} <= found
        assert os.getpid() not in found
        assert by_env.pid not in sup.scan_proc(set(), "j-20250101-120000-ffff")
    finally:
        for p in (by_env, by_group):
            p.kill()
            p.wait()
    assert not {by_env.pid, by_group.pid} & sup.scan_proc({by_group.pid}, JOB_ID)


def test_job_dir_validates_the_id_and_honours_the_root(monkeypatch) -> None:
    monkeypatch.delenv(jobfiles.ROOT_ENV, raising=False)
    assert jobfiles.job_dir(JOB_ID) == f"/var/lib/clusterkit/jobs/{JOB_ID}"
    assert jobfiles.job_dir(JOB_ID, root="/tmp/n1/") == f"/tmp/n1/var/lib/clusterkit/jobs/{JOB_ID}"
    monkeypatch.setenv(jobfiles.ROOT_ENV, "/r")
    assert jobfiles.job_dir(JOB_ID) == f"/r/var/lib/clusterkit/jobs/{JOB_ID}"
    with pytest.raises(UsageError):
        jobfiles.job_dir("j-2025/../../etc")


def test_parse_state_gives_a_typed_view() -> None:
    text = json.dumps({
        "job_id": JOB_ID, "node": 0, "state": "failed", "reason": "node 1 worker-0 exited with 3",
        "failed": {"node": 1, "process": "worker-0", "exit": 3}, "supervisor": "gone",
        "processes": {"worker-0": {"pid": 12, "role": "worker", "state": "exited", "exit": -15},
                      "server-0": {"pid": 11, "role": "server", "state": "running",
                                   "exit": None}}, "updated": 1.5})
    state = jobfiles.parse_state(text)
    assert state.state is jobfiles.JobStateName.FAILED and state.state.final
    assert state.failed == jobfiles.FailedProcess(node=1, process="worker-0", exit=3)
    assert [p.name for p in state.processes] == ["server-0", "worker-0"]
    assert state.processes[1] == jobfiles.ProcessState("worker-0", "worker", 12, "exited", -15)
    assert state.supervisor_running is False
    quiet = jobfiles.parse_state(json.dumps({"job_id": JOB_ID, "state": "running"}))
    assert quiet.failed is None and quiet.supervisor_running is None
    assert not quiet.state.final
    for bad in ("{", '{"state": "exploded"}', "[]"):
        with pytest.raises(ClusterkitError):
            jobfiles.parse_state(bad)


def test_stop_kills_only_the_cgroup_of_its_own_job() -> None:
    name = f"c1-0-{JOB_ID}"
    own = f"/sys/fs/cgroup/unified/clusterkit/{name}"
    assert sup.recorded_cgroup({"cgroup": own}, name).path == own
    scope = f"/sys/fs/cgroup/system.slice/ck-{name}.scope"
    group = sup.recorded_cgroup({"cgroup": scope, "cgroup_unit": f"ck-{name}.scope"}, name)
    assert (group.path, group.unit) == (scope, f"ck-{name}.scope")
    for state in ({"cgroup": "/sys/fs/cgroup/unified/system.slice"},
                  {"cgroup": f"/sys/fs/cgroup/unified/clusterkit/../../{name}"},
                  {"cgroup": "/x/clusterkit/" + name, "cgroup_unit": "sshd.service"},
                  {"cgroup": None}, {}):
        assert sup.recorded_cgroup(state, name) is None
