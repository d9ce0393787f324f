"""The supervisor's pure helpers (node/supervisor_daemon.py) and the files shipped with
it (node/bundle.py): no daemon, no cgroup, no root. The program runs on nodes with their
own python3, so it must stay stdlib-only and parse as Python 3.8: so must every program
of clusterkit/node/."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterkit.bootstrap import efa
from clusterkit.node import bundle, supervisor
from clusterkit.node import supervisor_daemon as daemon

JOB_ID = "j-20250101-120000-ab12"


def _imports_only_the_stdlib_and(source: str, name: str, siblings: set) -> None:
    tree = ast.parse(source, feature_version=(3, 8))
    imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import)
                for a in n.names}
    imported |= {n.module.split(".")[0] for n in ast.walk(tree)
                 if isinstance(n, ast.ImportFrom) and n.module}
    # no clusterkit import: only the stdlib and the files shipped beside it
    assert imported <= set(sys.stdlib_module_names) | siblings, name


def test_the_node_files_parse_as_python_3_8_and_import_only_the_stdlib() -> None:
    files = bundle.files()
    assert set(files) == {"supervisor.py", "supervisor_daemon.py", "coord.py", "reaping.py",
                          "jobstate.py", "interruption.py", "sampler.py", "samples.py",
                          "totals.py", "stall.py", "gpuhealth.py", "gpuwatch.py", "nodefiles.py",
                          "paths.py", "daemonize.py", "link.py", "wire.py", "jobfile.py",
                          "nodestate.py", "procgroup.py", "watchers.py"}
    siblings = {name.removesuffix(".py") for name in files}
    for name, source in files.items():
        _imports_only_the_stdlib_and(source, name, siblings)


def test_every_node_program_parses_as_python_3_8_and_imports_only_the_stdlib() -> None:
    package = Path(bundle.__file__).parent
    shipped = {p.name: p.read_text() for p in package.glob("*.py")
               if p.name not in ("__init__.py", "bundle.py")}  # the client's, not shipped
    assert {"follower.py", "observer.py", "watchdog.py", "nccl_allreduce.py"} <= set(shipped)
    siblings = {name.removesuffix(".py") for name in shipped}
    for name, source in shipped.items():
        # the all-reduce test runs under the job's python, with its torch
        torch = {"torch"} if name == "nccl_allreduce.py" else set()
        _imports_only_the_stdlib_and(source, name, siblings | torch)


def test_the_supervisor_run_as_a_file_imports_its_modules_from_its_own_dir(tmp_path) -> None:
    for name, text in bundle.files().items():
        (tmp_path / name).write_text(text)
    out = subprocess.run([sys.executable, "-P", str(tmp_path / "supervisor.py"), "status",
                          str(tmp_path / JOB_ID)], capture_output=True, text=True,
                         cwd="/", timeout=30)
    assert out.returncode == 2, out.stderr  # got as far as reading the (missing) job.json
    assert "no readable job.json" in out.stderr
    assert not (tmp_path / "__pycache__").exists()


def test_process_env_is_minimal_plus_the_job_keys() -> None:
    base = {"PATH": "/bin", "HOME": "/home/u", "AWS_SECRET_ACCESS_KEY": "x", "TERM": "y"}
    env = daemon.process_env(base, {"DMLC_ROLE": "worker", "N": 3}, JOB_ID, 2)
    assert env == {"PATH": "/bin", "HOME": "/home/u", "LANG": "C.UTF-8",
                   "DMLC_ROLE": "worker", "N": "3", "CLUSTERKIT_JOB_ID": JOB_ID,
                   "CLUSTERKIT_NODE_RANK": "2"}
    forged = daemon.process_env({}, {"CLUSTERKIT_JOB_ID": "other", "CLUSTERKIT_NODE_RANK": "0"},
                             JOB_ID, 1)
    assert (forged["CLUSTERKIT_JOB_ID"], forged["CLUSTERKIT_NODE_RANK"]) == (JOB_ID, "1")
    assert daemon.process_env({}, {}, JOB_ID, 0)["PATH"] == daemon.DEFAULT_PATH


def test_the_efa_profile_is_read_not_run_and_the_job_keys_win(tmp_path: Path) -> None:
    """What the bootstrap's efa step writes (efa.profile_text) comes back as the same
    settings; anything but assignments is left out, never executed."""
    assert daemon.EFA_PROFILE == efa.PROFILE_PATH  # the node side cannot import efa.py
    written = {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "ODD": "a b'c $HOME"}
    profile = tmp_path / "clusterkit-efa.sh"
    profile.write_text(efa.profile_text(written) + "touch ran\nexport BAD-NAME=1\n"
                       "export Q=\"unterminated\nexport $(touch ran)=1\n")
    assert daemon.profile_env(str(profile)) == written
    assert not (tmp_path / "ran").exists() and not Path("ran").exists()
    assert daemon.profile_env(str(tmp_path / "missing")) == {}
    env = daemon.process_env({}, {"FI_PROVIDER": "tcp", "N": "1"}, JOB_ID, 0,
                             daemon.profile_env(str(profile)))
    assert (env["FI_PROVIDER"], env["FI_EFA_USE_DEVICE_RDMA"]) == ("tcp", "1")
    with_profile = daemon.process_env({}, {}, JOB_ID, 0, {"CLUSTERKIT_JOB_ID": "x"})
    assert with_profile["CLUSTERKIT_JOB_ID"] == JOB_ID


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
        supervisor.load_job(_job_dir(tmp_path, **overrides))


def test_load_job_accepts_a_good_job(tmp_path: Path) -> None:
    assert supervisor.load_job(_job_dir(tmp_path)).job_id == JOB_ID
    with pytest.raises(ValueError, match="no readable job.json"):
        supervisor.load_job(str(tmp_path))


def test_write_json_is_private_and_atomic(tmp_path: Path) -> None:
    path = str(tmp_path / "state.json")
    daemon.write_json(path, {"a": 1})
    assert json.loads(Path(path).read_text()) == {"a": 1}
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["state.json"]
