"""The timed sandbox (`sandbox start --timings aws:SCALE`) on its own daemon: a launched
instance is pending for AWS's pending -> running wait, its sshd answers only after the
running -> SSH wait, each call is held back by its round trip, and the daemon's record
(run/timeline.jsonl) holds every call and wait; `sandbox status --json` shows the table
in force, and the untimed sandbox keeps answering at once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.sandboxmode import apply, sandbox_env
from clusterkit.timescale import TIME_SCALE_ENV
from clusterkit_sandbox import credentials
from clusterkit_sandbox.control import do_start, do_status, do_stop
from clusterkit_sandbox.state import NODES_FILE, RUN_DIR, read_json
from clusterkit_sandbox.timed import TIMELINE_FILE, read_timeline
from clusterkit_sandbox.timings import ROUND_TRIPS, WAITS, Timings, Wait

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
SCALE = 0.06  # pending 0.3 s, SSH 0.3 s, RunInstances 0.09 s


def _ec2(where: Path, endpoint: str):
    return credentials.client(where, "ec2", endpoint)


def _poll(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if (found := check()):
            return found
        time.sleep(0.02)
    raise AssertionError("not seen in time")


def _state(ec2, iid: str) -> str:
    (res,) = ec2.describe_instances(InstanceIds=[iid])["Reservations"]
    return res["Instances"][0]["State"]["Name"]


def test_instances_wait_as_aws_does_and_every_wait_is_recorded(tmp_path: Path) -> None:
    where = tmp_path / "state"
    status = do_start(where, Timings(SCALE))
    try:
        assert status["timings"]["scale"] == SCALE and status["timings"]["profile"] == "aws"
        ec2 = _ec2(where, status["endpoint"])
        ec2.create_key_pair(KeyName="k")
        (inst,) = ec2.run_instances(  # tagged: the agent runs a node only for a cluster's
            ImageId="ami-12c6146b", MinCount=1, MaxCount=1, KeyName="k",
            TagSpecifications=[{"ResourceType": "instance",
                                "Tags": [{"Key": "clusterkit:cluster", "Value": "timed"}]}],
        )["Instances"]
        iid = inst["InstanceId"]
        assert inst["State"]["Name"] == "pending"
        _poll(lambda: _state(ec2, iid) == "running")
        ready = _poll(lambda: (read_json(where / NODES_FILE, {}) or {}).get(iid, {})
                      .get("state") == "ready")
        assert ready
        lines = read_timeline(where / RUN_DIR / TIMELINE_FILE)
        waits = {(w["what"], w["resource"]): w for w in lines if w["kind"] == "wait"}
        running = waits[(Wait.INSTANCE_RUNNING.value, iid)]
        ssh = waits[(Wait.SSH_ANSWERS.value, iid)]
        assert running["end"] - running["start"] >= SCALE * WAITS[Wait.INSTANCE_RUNNING].seconds
        assert ssh["end"] - ssh["start"] >= SCALE * WAITS[Wait.SSH_ANSWERS].seconds
        assert ssh["start"] >= running["end"] - 0.2  # SSH counts from running (agent tick)
        calls = [c for c in lines if c["kind"] == "call" and c["what"] == "RunInstances"]
        assert calls and calls[0]["end"] - calls[0]["start"] >= \
            SCALE * ROUND_TRIPS["run_instances"].seconds
        shown = CliRunner().invoke(cli, ["sandbox", "status", "--dir", str(where), "--json"])
        assert json.loads(shown.stdout)["timings"]["waits"][Wait.SSH_ANSWERS.value][
            "sandbox_s"] == round(SCALE * WAITS[Wait.SSH_ANSWERS].seconds, 4)
        # a client of it polls at its pace
        assert sandbox_env(str(where))[TIME_SCALE_ENV] == str(SCALE)
    finally:
        do_stop(where)
    assert do_status(where)["timings"]["profile"] == "none"  # nothing runs: no table


def test_the_untimed_sandbox_answers_at_once(tmp_path: Path) -> None:
    where = tmp_path / "state"
    status = do_start(where)
    try:
        assert status["timings"]["profile"] == "none"
        ec2 = _ec2(where, status["endpoint"])
        (inst,) = ec2.run_instances(ImageId="ami-12c6146b", MinCount=1,
                                    MaxCount=1)["Instances"]
        # moto >= 5.2.5 answers RunInstances "pending" whatever the state: ask again
        assert _state(ec2, inst["InstanceId"]) == "running"
        lines = read_timeline(where / RUN_DIR / TIMELINE_FILE)
        assert [c["what"] for c in lines if c["kind"] == "call"][-2:] == [
            "RunInstances", "DescribeInstances"]
        assert not [w for w in lines if w["kind"] == "wait"]
        env = {TIME_SCALE_ENV: "0.1"}  # left from a timed sandbox: gone
        apply(env, str(where))
        assert TIME_SCALE_ENV not in env
    finally:
        do_stop(where)


def test_bad_timings_exit_2_before_anything_starts(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["sandbox", "start", "--dir", str(tmp_path / "s"),
                                      "--timings", "aws:fast"])
    assert result.exit_code == 2 and "SCALE must be a number" in result.stderr
    assert not (tmp_path / "s" / "state.json").exists()
