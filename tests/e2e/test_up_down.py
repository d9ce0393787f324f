"""`up` / `down` end to end in the sandbox: moto in server mode plus a real OpenSSH
server per running instance on its own loopback address. Nothing is mocked."""

from __future__ import annotations

import subprocess
from pathlib import Path

import boto3
import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.remote import known_hosts
from tests import support
from tests.integration.conftest import Calls, leftovers, runtime, write_spec

SANDBOX_AMI = "ami-1e749f67"  # an Ubuntu image the emulator ships


@pytest.fixture
def e2e_spec(sandbox_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    support.require_root("the sandbox's SSH nodes")
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path / "ckhome"))
    key = support.ssh_keygen(tmp_path / "id_ed25519")
    return write_spec(tmp_path, name=support.unique_name("e2e"), count=3,
                      ami=SANDBOX_AMI, placement_group=False,
                      extra=f"  identity_file: {key}\n")


def _ssh(key: Path, known: Path, address: str, command: str) -> str:
    return subprocess.run(
        ["ssh", "-i", str(key), "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes",
         "-o", f"UserKnownHostsFile={known}", "-o", "StrictHostKeyChecking=yes",
         f"ubuntu@{address}", command],
        capture_output=True, text=True, check=True, timeout=60).stdout


def test_up_three_nodes_ssh_then_idempotent_then_down(e2e_spec: Path, tmp_path: Path,
                                                       capsys):
    name = e2e_spec.read_text().split("\n")[0].split(": ")[1]
    key = tmp_path / "id_ed25519"
    result = do_up(str(e2e_spec), yes=True, rt=runtime(), timeout=120)
    shown = capsys.readouterr().err
    for k in (1, 2, 3):  # the SSH wait shows nodes ready k/N with the elapsed time
        assert f"({k}/3 ready, " in shown, shown
    nodes = result.nodes
    assert [n.role for n in nodes] == ["master", "worker", "worker"]
    known = known_hosts.known_hosts_path(name)  # recorded by `up` on first contact
    assert len(known.read_text().splitlines()) == 3
    for node in nodes:
        assert node.ssh_address is not None and node.ssh_address.startswith("127.")
        assert _ssh(key, known, node.ssh_address, "echo ok").strip() == "ok"

    calls = Calls()
    again = do_up(str(e2e_spec), yes=True, rt=runtime(calls), timeout=120)
    assert calls.mutating() == {}, calls.mutating()
    assert [n.instance_id for n in again.nodes] == [n.instance_id for n in nodes]

    do_down(str(e2e_spec), yes=True, rt=runtime())
    assert leftovers(name) == {}
    assert not known.exists()
    ec2 = boto3.client("ec2", "us-east-1")
    states = {i["State"]["Name"] for r in ec2.describe_instances(
        InstanceIds=[n.instance_id for n in nodes])["Reservations"] for i in r["Instances"]}
    assert states == {"terminated"}
