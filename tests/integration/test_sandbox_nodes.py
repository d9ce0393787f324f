"""Node behaviour on the shared sandbox: lifecycle, disks, EFS, isolation, CLI.
Real moto server, real sshd nodes, real loop devices (root)."""

from __future__ import annotations

import json
import socket
import subprocess
import time

import pytest
from click.testing import CliRunner

from clusterkit.aws.session import client, make_session
from clusterkit.cli.main import cli
from clusterkit.remote.address import ssh_address

pytestmark = [pytest.mark.sandbox, pytest.mark.root]


def _closed(address: str) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((address, 22)) != 0


def test_product_path_reaches_nodes_through_the_hook(sandbox_env, sandbox_cluster):
    """clusterkit.aws.session.client + ssh_address: the way product code gets there."""
    (launched,) = sandbox_cluster.launch(1)
    ec2 = client(make_session(), "ec2")
    reservations = ec2.describe_instances(InstanceIds=[launched.instance_id])["Reservations"]
    instance = reservations[0]["Instances"][0]
    assert ssh_address(instance) == launched.address
    assert sandbox_cluster.run(launched, "hostname").stdout.strip() == launched.hostname


def test_stop_start_terminate(sandbox_cluster):
    (n,) = sandbox_cluster.launch(1)
    sandbox_cluster.run(n, "echo kept > /root/survives")
    ec2 = sandbox_cluster.ec2
    ec2.stop_instances(InstanceIds=[n.instance_id])
    sandbox_cluster.sandbox.wait_nodes([n.instance_id], states=("stopped",))
    assert _closed(n.address)
    ec2.start_instances(InstanceIds=[n.instance_id])
    (again,) = sandbox_cluster.wait_ssh([n.instance_id])
    assert again.address == n.address and again.host_key == n.host_key
    assert sandbox_cluster.run(n, "cat /root/survives").stdout.strip() == "kept"
    sandbox_cluster.terminate([n.instance_id])
    assert _closed(n.address)


def test_nodes_are_isolated(sandbox_cluster):
    a, b = sandbox_cluster.launch(2)
    sandbox_cluster.run(a, "echo '10.9.9.9 only-a' >> /etc/hosts && mkdir -p /scratch && "
                           "touch /tmp/only-a")
    out = sandbox_cluster.run(b, "grep -c only-a /etc/hosts; ls /tmp/only-a; ls -d /scratch",
                              check=False)
    assert out.stdout.splitlines()[0] == "0"
    assert not Path_exists("/tmp/only-a") and not Path_exists("/scratch")


def Path_exists(path: str) -> bool:  # noqa: N802 - host-side check, outside every node
    from pathlib import Path

    return Path(path).exists()


def test_ebs_attach_snapshot_clone(sandbox_cluster):
    """Volume -> attach -> mkfs+write on node A -> snapshot -> new volume from it ->
    attach to node B -> the file is there, at the Nitro by-id path."""
    a, b = sandbox_cluster.launch(2)
    ec2 = sandbox_cluster.ec2
    az = ec2.describe_instances(InstanceIds=[a.instance_id])["Reservations"][0]["Instances"][0][
        "Placement"]["AvailabilityZone"]
    vol = ec2.create_volume(Size=1, AvailabilityZone=az)["VolumeId"]
    ec2.attach_volume(VolumeId=vol, InstanceId=a.instance_id, Device="/dev/sdf")
    dev = f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{vol.replace('-', '')}"
    sandbox_cluster.run(a, f"for i in $(seq 50); do [ -b {dev} ] && break; sleep 0.1; done; "
                           f"mkfs.ext4 -q {dev} && mkdir -p /data && mount {dev} /data && "
                           "echo dataset > /data/hello && umount /data")
    snap = ec2.create_snapshot(VolumeId=vol)["SnapshotId"]
    clone = ec2.create_volume(SnapshotId=snap, AvailabilityZone=az)["VolumeId"]
    ec2.attach_volume(VolumeId=clone, InstanceId=b.instance_id, Device="/dev/sdf")
    dev_b = f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{clone.replace('-', '')}"
    out = sandbox_cluster.run(b, f"for i in $(seq 50); do [ -b {dev_b} ] && break; sleep 0.1; "
                                 f"done; mkdir -p /data && mount -o ro {dev_b} /data && "
                                 "cat /data/hello && umount /data")
    assert out.stdout.strip() == "dataset"
    ec2.detach_volume(VolumeId=clone, InstanceId=b.instance_id)  # moto needs the id
    out = sandbox_cluster.run(b, f"sleep 0.5; test -e {dev_b} && echo present || echo gone")
    assert out.stdout.strip() == "gone"


def test_instance_store_and_md(sandbox_cluster):
    (n,) = sandbox_cluster.launch(1, instance_type="c5d.large")
    out = sandbox_cluster.run(n, "ls /dev/disk/by-id/")
    assert "nvme-Amazon_EC2_NVMe_Instance_Storage_" in out.stdout
    md = sandbox_cluster.run(n, "mdadm --create /dev/md0 --level=0 --raid-devices=2 a b",
                             check=False)
    assert md.returncode != 0 and "not emulated" in md.stderr


def test_efs_is_shared_between_nodes(sandbox_cluster):
    a, b = sandbox_cluster.launch(2)
    target = "fs-0123abcd.efs.us-east-1.amazonaws.com:/"
    for n in (a, b):
        sandbox_cluster.run(n, f"mkdir -p /efs && mount -t nfs4 -o nfsvers=4.1 {target} /efs")
    sandbox_cluster.run(a, "echo shared > /efs/f")
    assert sandbox_cluster.run(b, "cat /efs/f").stdout.strip() == "shared"


def test_cli_status_and_banner(sandbox, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_SANDBOX_DIR", str(sandbox.dir))
    runner = CliRunner()
    res = runner.invoke(cli, ["sandbox", "status", "--json"])
    assert res.exit_code == 0, res.output
    status = json.loads(res.stdout)
    assert status["running"] and status["endpoint"] == sandbox.endpoint
    res = runner.invoke(cli, ["--sandbox", "sandbox", "status"])
    assert sandbox.endpoint in res.output


def test_cli_banner_on_other_commands(sandbox):
    env = {"CLUSTERKIT_SANDBOX_DIR": str(sandbox.dir), "CLUSTERKIT_SANDBOX": "1",
           "PATH": "/usr/bin:/bin"}
    import sys

    out = subprocess.run([sys.executable, "-m", "clusterkit", "status"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert f"sandbox mode: AWS endpoint {sandbox.endpoint}" in out.stderr


def test_cli_refuses_when_not_running(tmp_path):
    env = {"CLUSTERKIT_SANDBOX_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    import sys

    out = subprocess.run([sys.executable, "-m", "clusterkit", "--sandbox", "status"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "not running" in out.stderr and "clusterkit sandbox start" in out.stderr
    time.sleep(0)


def test_client_env_is_the_standard_aws_mechanism(sandbox):
    """AWS_ENDPOINT_URL + throwaway credentials; a real profile is dropped, a region kept,
    and no public-IP lookup is needed for the SSH rule."""
    from clusterkit.sandbox.client import apply

    env = {"AWS_PROFILE": "real-account", "AWS_REGION": "eu-west-1"}
    values = apply(env, str(sandbox.dir))
    assert env["AWS_ENDPOINT_URL"] == values["AWS_ENDPOINT_URL"] == sandbox.endpoint
    assert env["AWS_ACCESS_KEY_ID"] == env["AWS_SECRET_ACCESS_KEY"] == "testing"
    assert "AWS_PROFILE" not in env and env["AWS_REGION"] == "eu-west-1"
    assert env["CLUSTERKIT_SANDBOX"] == "1" and env["CLUSTERKIT_CALLER_CIDR"] == "127.0.0.1/32"
    assert env["CLUSTERKIT_ADDRESS_MAP"].startswith(str(sandbox.dir))
