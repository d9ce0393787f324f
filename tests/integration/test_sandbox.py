"""The sandbox end to end: its own daemon (not the session fixture), because
this test checks start time and that stop leaves nothing behind. Real moto
server over HTTP, real sshd nodes, real OpenSSH client and ssh-agent."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import paramiko
import pytest

from clusterkit_sandbox import credentials, disks
from clusterkit_sandbox.control import do_start, do_status, do_stop, mounts_under
from clusterkit_sandbox.state import NODES_FILE, STATE_FILE, pid_alive, read_json
from tests import support

pytestmark = [pytest.mark.sandbox, pytest.mark.root]


def _ssh_open(address: str) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((address, 22)) == 0


def _node_pids(records: dict) -> list[int]:
    return [r["pid"] for r in records.values() if r.get("pid")]


def _agent(tmp_path: Path, key: Path) -> dict[str, str]:
    out = subprocess.run(["ssh-agent", "-s", "-a", str(tmp_path / "agent.sock")],
                         capture_output=True, text=True, check=True).stdout
    env = dict(os.environ, SSH_AUTH_SOCK=str(tmp_path / "agent.sock"))
    env["SSH_AGENT_PID"] = out.split("SSH_AGENT_PID=")[1].split(";")[0]
    subprocess.run(["ssh-add", "-q", str(key)], env=env, check=True)
    return env


def _launch_three(ec2, key_name: str) -> list[str]:
    resp = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=3, MaxCount=3, InstanceType="t3.micro",
        KeyName=key_name, TagSpecifications=[{"ResourceType": "instance", "Tags": [
            {"Key": "clusterkit:cluster", "Value": "done-when"}]}])
    return [i["InstanceId"] for i in resp["Instances"]]


def _wait_ready(where: Path, ids: list[str], timeout: float = 10) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        nodes = read_json(where / NODES_FILE, {}) or {}
        if all(nodes.get(i, {}).get("state") == "ready" for i in ids):
            return nodes
        time.sleep(0.05)
    raise AssertionError(f"nodes not ready: {read_json(where / NODES_FILE)}")


def _paramiko_hostname(address: str, key: Path, host_key: str) -> str:
    ssh = paramiko.SSHClient()
    kind, blob = host_key.split()[:2]
    ssh.get_host_keys().add(address, kind, paramiko.PKey.from_type_string(kind,
                            __import__("base64").b64decode(blob)))
    ssh.set_missing_host_key_policy(paramiko.RejectPolicy())
    ssh.connect(address, username="ubuntu", key_filename=str(key), timeout=5,
                allow_agent=False, look_for_keys=False)
    try:
        _, out, _ = ssh.exec_command("hostname")
        return out.read().decode().strip()
    finally:
        ssh.close()


def _ec2_with_key_pair(where: Path, endpoint: str, tmp_path: Path) -> tuple[Any, Path]:
    """An EC2 client on the sandbox and key pair "k", its private key saved 0600."""
    ec2 = credentials.client(where, "ec2", endpoint)
    key = tmp_path / "k.pem"
    key.write_text(ec2.create_key_pair(KeyName="k")["KeyMaterial"])
    key.chmod(0o600)
    return ec2, key


def test_done_when(tmp_path: Path) -> None:
    """Start, three instances via boto3, SSH to each (paramiko, host keys checked),
    distinct hostnames, node-to-node with a forwarded agent, terminate -> sshd gone,
    stop -> no process, mount, loop device or temp file left."""
    where = tmp_path / "state"
    started = time.monotonic()
    status = do_start(where)
    print(f"sandbox start took {time.monotonic() - started:.2f} s")
    daemon = status["pid"]
    try:
        ec2, key = _ec2_with_key_pair(where, status["endpoint"], tmp_path)
        launched = time.monotonic()
        ids = _launch_three(ec2, "k")
        nodes = _wait_ready(where, ids)
        print(f"three nodes ready {time.monotonic() - launched:.2f} s after RunInstances")
        addresses = [nodes[i]["address"] for i in ids]
        assert len(set(addresses)) == 3
        assert all(a.startswith("127.") for a in addresses)
        names = {_paramiko_hostname(nodes[i]["address"], key, nodes[i]["host_key"])
                 for i in ids}
        assert len(names) == 3, names

        known = tmp_path / "known_hosts"
        known.write_text("".join(f"{n['address']} {n['host_key']}\n" for n in nodes.values()))
        env = _agent(tmp_path, key)
        try:
            a, b = nodes[ids[0]], nodes[ids[1]]
            opts = f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={known}"
            # A gets the host keys (as clusterkit distributes them) but no private key:
            # the hop to B works only through the forwarded agent
            inner = ("sudo -n tee /etc/ssh/ssh_known_hosts > /dev/null && "
                     "! ls ~/.ssh/id_* 2>/dev/null && "
                     f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes ubuntu@{b['address']} "
                     "hostname")
            out = subprocess.run(["ssh", "-A", *opts.split(), f"ubuntu@{a['address']}", inner],
                                 env=env, input=known.read_text(), capture_output=True,
                                 text=True, timeout=30)
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == b["hostname"]
        finally:
            subprocess.run(["ssh-agent", "-k"], env=env, capture_output=True)

        pids = _node_pids(nodes)
        ec2.terminate_instances(InstanceIds=ids)
        deadline = time.monotonic() + 10
        # Termination is asynchronous: the listener closes first, the node's processes
        # exit a moment later.
        while time.monotonic() < deadline and (any(_ssh_open(a) for a in addresses)
                                               or any(pid_alive(p) for p in pids)):
            time.sleep(0.05)
        assert not any(_ssh_open(a) for a in addresses)
        assert not any(pid_alive(p) for p in pids)
    finally:
        result = do_stop(where)
    assert result["was_running"]
    assert not pid_alive(daemon)
    assert not do_status(where)["running"]
    assert not (where / STATE_FILE).exists()
    assert not (where / "run").exists()
    assert mounts_under(where) == []
    assert disks.loops_under(where) == []
    assert _pgrep(str(where)) == []


def _pgrep(pattern: str) -> list[str]:
    """Pids of processes whose command line contains ``pattern`` (pgrep -f)."""
    out = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    assert out.returncode in (0, 1), out.stderr  # 1: none matched; anything else: broken
    return out.stdout.split()


def test_stop_sweeps_after_a_crashed_daemon(tmp_path: Path) -> None:
    """kill -9 the daemon while a node runs with a volume mounted inside it and a
    detached job: `stop` still leaves no process, mount or loop device."""
    where = tmp_path / "state"
    job = support.unique_name("ck-detached-job")
    status = do_start(where)
    try:
        ec2, key = _ec2_with_key_pair(where, status["endpoint"], tmp_path)
        resp = ec2.run_instances(
            ImageId="ami-12c6146b", MinCount=1, MaxCount=1, InstanceType="c5d.large",
            KeyName="k", TagSpecifications=[{"ResourceType": "instance", "Tags": [
                {"Key": "clusterkit:cluster", "Value": "crash"}]}])
        inst = resp["Instances"][0]
        node = _wait_ready(where, [inst["InstanceId"]])[inst["InstanceId"]]
        vol = ec2.create_volume(Size=1, AvailabilityZone=inst["Placement"]["AvailabilityZone"])
        ec2.attach_volume(VolumeId=vol["VolumeId"], InstanceId=inst["InstanceId"],
                          Device="/dev/sdf")
        dev = f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{vol['VolumeId'].replace('-', '')}"
        known = tmp_path / "known_hosts"
        known.write_text(f"{node['address']} {node['host_key']}\n")
        # the detached job's command line carries a marker no other process on the host has
        script = (f"for i in $(seq 50); do [ -b {dev} ] && break; sleep 0.1; done; "
                  f"sudo -n mkfs.ext4 -q {dev} && sudo -n mkdir -p /data && "
                  f"sudo -n mount {dev} /data && "
                  f"(setsid bash -c 'exec -a {job} sleep 600' >/dev/null 2>&1 < /dev/null &)"
                  " && echo ok")
        out = subprocess.run(["ssh", "-i", str(key), "-o", "BatchMode=yes",
                              "-o", f"UserKnownHostsFile={known}", f"ubuntu@{node['address']}",
                              script], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
        support.wait_for(lambda: _pgrep(job), f"detached job {job} running")
        assert len(disks.loops_under(where)) >= 2  # the volume + the instance store
    finally:
        os.kill(status["pid"], 9)
        result = do_stop(where)
    assert result["killed"] >= 2  # sshd and the detached sleep
    assert disks.loops_under(where) == []
    assert mounts_under(where) == []
    assert not (where / "run").exists()
    assert not _ssh_open(node["address"])
    assert _pgrep(job) == []
