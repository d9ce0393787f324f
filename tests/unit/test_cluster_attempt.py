"""The pure parts of cluster/jobs/attempt.py and cluster/jobs/nodejobs.py: the command, the job archive,
which job is active or newest, the supervisor's stop report."""

from __future__ import annotations

import io
import json
import tarfile
import threading
from types import SimpleNamespace

import pytest

from clusterkit.cluster.jobs import attempt
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.results import NodeStop
from clusterkit.errors import RemoteError, UsageError
from clusterkit.node.jobfile import JobFile
from clusterkit.node.jobstate import JobStateName
from clusterkit.spec.model import Spec, Train
from clusterkit.training import jobfiles


def _spec(command: str | None) -> Spec:
    return Spec(name="c1", region="us-east-1", regions=("us-east-1",), nodes=None,  # type: ignore[arg-type]
                ssh=None, storage=None, train=Train(command=command), tags={})  # type: ignore[arg-type]


def test_command_after_dashes_wins_over_the_spec():
    assert attempt.training_command(_spec("python3 a.py"), ("python3", "b.py")) == "python3 b.py"
    assert attempt.training_command(_spec("python3 a.py"), ()) == "python3 a.py"
    with pytest.raises(UsageError, match="no training command"):
        attempt.training_command(_spec(None), ())


def test_job_archive_keeps_job_json_private_and_ships_every_node_file():
    files = {"supervisor.py": "import coord", "coord.py": "print(1)"}
    data = attempt.job_archive(JobFile("j").with_token("s3cret"), files)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = {m.name: m for m in tar.getmembers()}
        assert set(members) == {"job.json", "supervisor.py", "coord.py"}
        assert members["job.json"].mode == 0o600
        assert json.loads(tar.extractfile("job.json").read())["coordinator"]["token"] == "s3cret"  # type: ignore[union-attr]
        assert tar.extractfile("supervisor.py").read() == b"import coord"  # type: ignore[union-attr]
        assert tar.extractfile("coord.py").read() == b"print(1)"  # type: ignore[union-attr]


def test_start_command_carries_no_secret_and_checks_the_id():
    cmd = attempt.start_command("j-20250101-120000-ab12")
    assert "/var/lib/clusterkit/jobs/j-20250101-120000-ab12/supervisor.py start" in cmd
    assert "token" not in cmd
    with pytest.raises(UsageError):
        attempt.start_command("j-1; rm -rf /")


def test_the_workdir_rides_in_the_start_tar_and_is_swapped_in_before_the_supervisor():
    data = attempt.job_archive(JobFile("j"), {"supervisor.py": ""}, b"\x1f\x8bcode")
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.getmember(attempt.WORKDIR_MEMBER)
        assert member.mode == 0o600
        assert tar.extractfile(member).read() == b"\x1f\x8bcode"  # type: ignore[union-attr]
    cmd = attempt.start_command("j-20250101-120000-ab12", "/home/u/clusterkit-work/c1")
    d = "/var/lib/clusterkit/jobs/j-20250101-120000-ab12"
    swap = cmd.index(f"< {d}/{attempt.WORKDIR_MEMBER}")
    assert cmd.index("tar -x -C") < swap < cmd.index("supervisor.py start")
    assert "d=/home/u/clusterkit-work/c1;" in cmd and "(umask 022; " in cmd
    assert f"rm -f -- {d}/{attempt.WORKDIR_MEMBER};" in cmd
    assert attempt.WORKDIR_MEMBER not in attempt.start_command("j-20250101-120000-ab12")


def test_ready_reads_each_nodes_answer_and_refuses_a_master_short_of_ports():
    jc = SimpleNamespace(master=SimpleNamespace(hop=SimpleNamespace(label="m")))
    answer = {"jobs": [{"job_id": "j", "state": "running"}], "home": "/home/u",
              "ports": [20001, 20002, 20003], "cwd": "/efs/p"}
    group = {"m": SimpleNamespace(stdout="noise\n" + json.dumps(answer) + "\n"),
             "w": SimpleNamespace(stdout=json.dumps({"jobs": [], "home": "/home/u"}))}
    ready = attempt.read_ready(jc, group)  # type: ignore[arg-type]
    assert ready == attempt.Ready({"m": [jobfiles.state_of({"job_id": "j", "state": "running"})],
                                 "w": []}, [20001, 20002, 20003], "/home/u", "", "/efs/p")
    assert ready.jobs["m"][0].state is JobStateName.RUNNING
    group["m"] = SimpleNamespace(stdout=json.dumps({**answer, "ports": [20001, 20002]}))
    with pytest.raises(RemoteError, match="no 3 free ports on the master"):
        attempt.read_ready(jc, group)  # type: ignore[arg-type]


def test_active_and_latest_jobs_across_nodes():
    def job(job_id: str, state: str) -> jobfiles.JobState:
        return jobfiles.state_of({"job_id": job_id, "state": state})

    by_node = {"m": [job("j-20250101-120000-aaaa", "failed"),
                     job("j-20250102-120000-bbbb", "stopped")],
               "w": [job("j-20250101-130000-cccc", "running")]}
    assert jobs.active_jobs(by_node) == ["j-20250101-130000-cccc"]
    assert jobs.latest_job(by_node) == "j-20250102-120000-bbbb"
    assert jobs.latest_job({"m": []}) is None


def test_stop_report_is_the_supervisors_last_json_line():
    stopped = jobs._node_stop('noise\n{"job_id": "j", "state": "stopped"}\n')
    assert stopped.state is not None and stopped.state.state is JobStateName.STOPPED
    assert stopped.to_json() == {"state": "stopped", "reason": None, "processes": {}}
    assert jobs._node_stop("no such job here\n") == NodeStop(None, "no such job here")
    assert jobs._node_stop("") == NodeStop(None, "no answer")
    assert jobs._node_stop('{"state": "exploded"}').message == '{"state": "exploded"}'


def test_the_drain_after_the_masters_stream_never_holds_the_command_open():
    master = SimpleNamespace(hop=SimpleNamespace(label="m"))
    jc = SimpleNamespace(master=master, short=lambda label: "master")
    stop = threading.Event()
    printer = jobs.LogPrinter(jc, None, stop)  # type: ignore[arg-type]
    before = set(threading.enumerate())
    printer("m", 'S{"state": "succeeded"}')
    (drain,) = set(threading.enumerate()) - before
    assert drain.daemon  # a non-daemon timer kept `train` alive DRAIN_S after the job
    assert printer.states["master"].state is JobStateName.SUCCEEDED
    drain.cancel()  # type: ignore[attr-defined]


def test_the_nodes_watch_ec2s_metadata_or_in_the_sandbox_its_loopback_one(monkeypatch) -> None:
    from clusterkit.cluster.jobs.attempt import metadata_endpoint
    from clusterkit.node.interruption import DEFAULT_ENDPOINT

    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    monkeypatch.setenv("CLUSTERKIT_SANDBOX_METADATA_URL",
                       "http://127.0.0.1:5000/_clusterkit/imds/{instance_id}")
    assert metadata_endpoint("i-1") == DEFAULT_ENDPOINT == "http://169.254.169.254"
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")  # its nodes dial nothing but loopback
    assert metadata_endpoint("i-1") == "http://127.0.0.1:5000/_clusterkit/imds/i-1"
    monkeypatch.delenv("CLUSTERKIT_SANDBOX_METADATA_URL")  # what the sandbox handed over
    assert metadata_endpoint("i-1") == ""
