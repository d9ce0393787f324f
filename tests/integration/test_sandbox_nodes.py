"""Node behaviour on the shared sandbox: lifecycle, disks, EFS, isolation, CLI.
Real moto server, real sshd nodes, real loop devices (root)."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
from click.testing import CliRunner

from clusterkit.aws.instances import describe_nodes
from clusterkit.aws.session import client, make_session
from clusterkit.cli.main import cli
from clusterkit.remote.address import ssh_address
from tests import support

pytestmark = [pytest.mark.sandbox, pytest.mark.root]


def _closed(address: str) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.3)
        return sock.connect_ex((address, 22)) != 0


def _wait_closed(address: str) -> None:
    """The node agent stops a node's sshd asynchronously: poll, never sleep and hope."""
    support.wait_for(lambda: _closed(address), f"sshd on {address}:22 closed")


def _until_gone(path: str) -> str:
    """Node-side shell: poll (up to 10 s) until ``path`` is gone, then say "gone" (or
    "present"): a detached device vanishes when the node agent gets to it."""
    return (f"for i in $(seq 100); do [ -e {path} ] || break; sleep 0.1; done; "
            f"[ -e {path} ] && echo present || echo gone")


def test_product_path_reaches_nodes_through_the_hook(sandbox_env, sandbox_cluster):
    """clusterkit.aws (DescribeInstances -> Node) + ssh_address: the way product code
    gets there."""
    (launched,) = sandbox_cluster.launch(1)
    session = make_session()
    region = client(session, "ec2").meta.region_name
    (node,) = describe_nodes(session, region, [launched.instance_id])
    assert ssh_address(node) == launched.address
    assert sandbox_cluster.run(launched, "hostname").stdout.strip() == launched.hostname


def test_stop_start_terminate(sandbox_cluster):
    (n,) = sandbox_cluster.launch(1)
    sandbox_cluster.run(n, "sudo -n sh -c 'echo kept > /root/survives'")
    ec2 = sandbox_cluster.ec2
    ec2.stop_instances(InstanceIds=[n.instance_id])
    sandbox_cluster.sandbox.wait_nodes([n.instance_id], states=("stopped",))
    _wait_closed(n.address)
    ec2.start_instances(InstanceIds=[n.instance_id])
    (again,) = sandbox_cluster.wait_ssh([n.instance_id])
    assert again.address == n.address and again.host_key == n.host_key
    assert sandbox_cluster.run(n, "sudo -n cat /root/survives").stdout.strip() == "kept"
    sandbox_cluster.terminate([n.instance_id])
    _wait_closed(n.address)


def test_nodes_are_isolated(sandbox_cluster):
    """What node A writes to /etc/hosts, /tmp and / is seen on A only: not on B, not on
    the host. Each check prints its verdict, so B's whole answer is compared."""
    a, b = sandbox_cluster.launch(2)
    marker = support.unique_name("only-a")
    sandbox_cluster.run(a, f"echo '10.9.9.9 {marker}' | sudo -n tee -a /etc/hosts && "
                           f"sudo -n mkdir -p /{marker} && touch /tmp/{marker}")
    look = (f"grep -c {marker} /etc/hosts || true; "
            f"[ -e /tmp/{marker} ] && echo tmp-seen || echo tmp-unseen; "
            f"[ -e /{marker} ] && echo root-seen || echo root-unseen")
    assert sandbox_cluster.run(a, look).stdout.split() == ["1", "tmp-seen", "root-seen"]
    assert sandbox_cluster.run(b, look).stdout.split() == ["0", "tmp-unseen", "root-unseen"]
    assert not Path_exists(f"/tmp/{marker}") and not Path_exists(f"/{marker}")


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
                           f"sudo -n mkfs.ext4 -q {dev} && sudo -n mkdir -p /data && "
                           f"sudo -n mount {dev} /data && "
                           "sudo -n sh -c 'echo dataset > /data/hello' && sudo -n umount /data")
    snap = ec2.create_snapshot(VolumeId=vol)["SnapshotId"]
    clone = ec2.create_volume(SnapshotId=snap, AvailabilityZone=az)["VolumeId"]
    ec2.attach_volume(VolumeId=clone, InstanceId=b.instance_id, Device="/dev/sdf")
    dev_b = f"/dev/disk/by-id/nvme-Amazon_Elastic_Block_Store_{clone.replace('-', '')}"
    out = sandbox_cluster.run(b, f"for i in $(seq 50); do [ -b {dev_b} ] && break; sleep 0.1; "
                                 f"done; sudo -n mkdir -p /data && sudo -n mount -o ro {dev_b} /data && "
                                 "cat /data/hello && sudo -n umount /data")
    assert out.stdout.strip() == "dataset"
    ec2.detach_volume(VolumeId=clone, InstanceId=b.instance_id)  # moto needs the id
    out = sandbox_cluster.run(b, _until_gone(dev_b))
    assert out.stdout.strip() == "gone"


def test_instance_store_and_md(sandbox_cluster):
    (n,) = sandbox_cluster.launch(1, instance_type="c5d.large")
    out = sandbox_cluster.run(n, "ls /dev/disk/by-id/")
    assert "nvme-Amazon_EC2_NVMe_Instance_Storage_" in out.stdout
    md = sandbox_cluster.run(n, "sudo -n mdadm --create /dev/md0 --level=0 --raid-devices=2 a b",
                             check=False)
    assert md.returncode != 0 and "not emulated" in md.stderr


def test_efs_is_shared_between_nodes(sandbox_cluster):
    a, b = sandbox_cluster.launch(2)
    target = "fs-0123abcd.efs.us-east-1.amazonaws.com:/"
    for n in (a, b):
        sandbox_cluster.run(n, f"sudo -n mkdir -p /efs && "
                                  f"sudo -n mount -t nfs4 -o nfsvers=4.1 {target} /efs")
    sandbox_cluster.run(a, "echo shared | sudo -n tee /efs/f")
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
    assert out.returncode == 0, out.stderr  # no cluster in the sandbox yet is no error
    assert f"sandbox mode: AWS endpoint {sandbox.endpoint}" in out.stderr


def test_cli_refuses_when_not_running(tmp_path):
    env = {"CLUSTERKIT_SANDBOX_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    import sys

    out = subprocess.run([sys.executable, "-m", "clusterkit", "--sandbox", "status"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "not running" in out.stderr and "clusterkit sandbox start" in out.stderr


def test_client_env_is_the_standard_aws_mechanism(sandbox):
    """AWS_ENDPOINT_URL + the sandbox's credentials file; a real profile and real keys
    are dropped, a region kept, and no public-IP lookup is needed for the SSH rule."""
    from clusterkit.sandboxmode import apply

    env = {"AWS_PROFILE": "real-account", "AWS_REGION": "eu-west-1",
           "AWS_ACCESS_KEY_ID": "AKIAREALKEY", "AWS_SECRET_ACCESS_KEY": "real-secret"}
    values = apply(env, str(sandbox.dir))
    assert env["AWS_ENDPOINT_URL"] == values["AWS_ENDPOINT_URL"] == sandbox.endpoint
    assert "AWS_ACCESS_KEY_ID" not in env and "AWS_SECRET_ACCESS_KEY" not in env
    assert env["AWS_SHARED_CREDENTIALS_FILE"] == str(sandbox.dir / "auth" / "credentials")
    assert env["AWS_CONFIG_FILE"] == str(sandbox.dir / "auth" / "config")
    assert "AWS_PROFILE" not in env and env["AWS_REGION"] == "eu-west-1"
    assert env["CLUSTERKIT_SANDBOX"] == "1" and env["CLUSTERKIT_CALLER_CIDR"] == "127.0.0.1/32"
    assert env["CLUSTERKIT_ADDRESS_MAP"].startswith(str(sandbox.dir))
