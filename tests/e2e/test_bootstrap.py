"""`up` bootstraps every node, end to end in the sandbox (moto server + a real sshd per
node on loopback, each node with its own root, instance-store disks as loop images and
EFS as a directory the nodes share). Nothing is mocked.

One 3-node i3.large cluster for the module (one instance-store disk per node: scratch is
a plain filesystem, no mdadm), with EFS, brought up once by the fixture; the tests run
in any order: each first brings the cluster to what it needs with `up`, and what one
changes (the package list, a stopped node) `up` puts right for the next."""

from __future__ import annotations

import base64
import hashlib
import io
import os
import subprocess
import sys
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterkit.bootstrap.run import BootstrapError, BootstrapResult, Outcome
from clusterkit.bootstrap.steps import STEP_NAMES, host_names
from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.provision import imagebuild
from clusterkit.cluster.provision.planning import do_plan
from clusterkit.cluster.provision.up import UpResult, do_up
from clusterkit.plan.nodes import node_name
from clusterkit.spec import load
from clusterkit_sandbox.node import shared_dir
from tests import support
from tests.e2e.clusters import running, sandbox_spec, user_session
from tests.integration.conftest import leftovers, live_instances, runtime

CLI = str(Path(sys.executable).with_name("clusterkit"))
SECTIONS = """\
storage:
  scratch: {{mount: /scratch}}
  efs: {{mount: /efs, deletion_policy: delete}}
train:
  framework: mxnet
  packages: [{packages}]
"""
PIP_CONF = "[global]\\nno-index = true\\nfind-links = /efs/wheels\\n"


@dataclass
class Cluster:
    name: str
    spec: Path
    sandbox_dir: Path
    first: UpResult

    def up(self, *force: str) -> BootstrapResult:
        result = do_up(str(self.spec), yes=True, rt=runtime(), timeout=180,
                       force_steps=force).bootstrap
        assert result is not None and result.ok
        return result

    def write_spec(self, packages: str = "") -> None:
        self.spec.write_text(sandbox_spec(self.name, count=3, instance_type="i3.large",
                                          extra=SECTIONS.format(packages=packages)))

    def on(self, node: str, command: str, *, forward_agent: bool = False) -> str:
        (res,) = do_exec(self.name, [command], nodes=[node], forward_agent=forward_agent,
                         rt=runtime()).values()
        return res.stdout

    def everywhere(self, command: str) -> list[str]:
        return [r.stdout for r in do_exec(self.name, [command], rt=runtime()).values()]

    @property
    def efs_dir(self) -> Path:
        """The cluster's EFS on this machine (the sandbox's shared directory)."""
        (fs_id,) = leftovers(self.name)["file_systems"]
        return self.sandbox_dir / "run" / "efs" / fs_id


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("bootstrap")
    name = support.unique_name("bs")
    cl = Cluster(name, where / f"{name}.yaml", sandbox.dir, None)  # type: ignore[arg-type]
    cl.write_spec()
    with user_session(sandbox, where), running(cl.spec, name) as first:
        cl.first = first
        yield cl


def _ran(result: BootstrapResult) -> dict[str, list[int | None]]:
    """step -> the indexes of the nodes it ran on."""
    return {step: [n.node.index for n in result.nodes for s in n.steps
                   if s.step == step and s.outcome is Outcome.RAN] for step in STEP_NAMES}


def test_first_up_bootstraps_every_node_and_says_so(cluster: Cluster):
    first = cluster.first.bootstrap
    assert first is not None and first.ok and len(first.nodes) == 3
    for node in first.nodes:
        assert [s.step for s in node.steps] == list(STEP_NAMES)
        outcomes = {s.step: s.outcome for s in node.steps}
        assert outcomes["env"] is Outcome.SKIPPED  # empty package list
        # i3.large has no EFA (nor has the sandbox EFA software): no command, no warning
        efa = next(s for s in node.steps if s.step == "efa")
        assert (efa.outcome, efa.reason, efa.warning) == (Outcome.SKIPPED,
                                                          "i3.large has no EFA", "")
        assert all(outcomes[s] in (Outcome.RAN, Outcome.DONE)
                   for s in ("hostname", "hosts", "ssh", "scratch", "efs")), outcomes
    hostnames = [line.strip() for line in cluster.everywhere("hostname")]
    assert hostnames == [node_name(cluster.name, i) for i in range(3)]


def test_master_reaches_workers_by_name_with_host_keys_checked(cluster: Cluster):
    cluster.up()
    for index in (1, 2):
        out = cluster.on("master", f"ssh -o BatchMode=yes deeplearning-worker{index} hostname",
                         forward_agent=True)  # `exec -A`: exec alone forwards no agent
        assert out.strip() == node_name(cluster.name, index)
    config = cluster.on("master", "cat ~/.ssh/config")
    assert "StrictHostKeyChecking yes" in config and "ForwardAgent yes" in config
    # no private key on the node: the forwarded agent is what logs in
    assert not [f for f in cluster.on("master", "ls -A ~/.ssh").split() if f.startswith("id_")]


def test_second_and_third_up_run_no_step_and_hosts_stay_single(cluster: Cluster):
    cluster.up()
    for _ in range(2):
        again = cluster.up()
        assert again.bodies_run == 0, _ran(again)
        assert all(s.outcome in (Outcome.DONE, Outcome.SKIPPED)
                   for n in again.nodes for s in n.steps)
    names = [n for i in range(3) for n in host_names(cluster.name, i)]
    for hosts in cluster.everywhere("cat /etc/hosts"):
        words = [w for line in hosts.splitlines() if not line.startswith("#")
                 for w in line.split()[1:]]
        assert {n: words.count(n) for n in names} == dict.fromkeys(names, 1), hosts
    profile = cluster.on("worker-2", ". /etc/profile.d/clusterkit.sh && "
                         "echo $DEEPLEARNING_WORKERS_COUNT $CLUSTERKIT_NODE_RANK")
    assert profile.split() == ["3", "2"]


def test_a_file_written_on_efs_is_read_on_another_node(cluster: Cluster):
    cluster.up()
    token = uuid.uuid4().hex
    cluster.on("worker-1", f"echo {token} > /efs/shared-{token}")
    assert cluster.on("worker-2", f"cat /efs/shared-{token}").strip() == token
    assert cluster.on("master", f"cat /efs/shared-{token}").strip() == token


def _wheel(version: str) -> tuple[str, bytes]:
    """A pure-Python wheel of the package ckdemo at ``version`` (no network, no build)."""
    files = {"ckdemo/__init__.py": f"VERSION = {version!r}\n",
             f"ckdemo-{version}.dist-info/METADATA":
                 f"Metadata-Version: 2.1\nName: ckdemo\nVersion: {version}\n",
             f"ckdemo-{version}.dist-info/WHEEL":
                 "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                 "Tag: py3-none-any\n"}
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text.encode())}\n"
        for path, text in files.items()) + f"ckdemo-{version}.dist-info/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in {**files, f"ckdemo-{version}.dist-info/RECORD": record}.items():
            zf.writestr(path, text)
    return f"ckdemo-{version}-py3-none-any.whl", buf.getvalue()


def test_changed_packages_rebuild_only_the_environment(cluster: Cluster):
    cluster.up()
    wheels = cluster.efs_dir / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for version in ("0.1", "0.2"):
        filename, data = _wheel(version)
        (wheels / filename).write_bytes(data)
    cluster.everywhere(f"printf '{PIP_CONF}' | sudo -n tee /etc/pip.conf")  # pip: no index, only EFS
    try:
        for version in ("0.1", "0.2"):
            cluster.write_spec(f"ckdemo=={version}")
            result = cluster.up()
            ran = _ran(result)
            assert ran == {**{s: [] for s in STEP_NAMES}, "env": [0, 1, 2]}, ran
            assert cluster.everywhere(
                "/opt/clusterkit/envs/current/bin/python -c "
                "'import ckdemo; print(ckdemo.VERSION)'") == [f"{version}\n"] * 3
        assert cluster.up().bodies_run == 0  # the same list again: nothing reinstalled
    finally:
        cluster.write_spec()
        cluster.everywhere("sudo -n rm -f /etc/pip.conf")


def test_a_node_whose_disks_were_wiped_gets_its_scratch_back(cluster: Cluster):
    cluster.up()
    # as root: a label is read from the device (the sandbox has no udev to cache it)
    labels = cluster.everywhere("sudo -n findmnt -n -o LABEL,OPTIONS /scratch")
    assert all(line.split()[0] == "ck-scratch" and "noatime" in line for line in labels)
    worker = cluster.first.nodes[2].instance_id
    cluster.on("worker-2", "touch /scratch/before-stop")
    ec2 = runtime().session.client("ec2")
    ec2.stop_instances(InstanceIds=[worker])
    support.wait_for(lambda: ec2.describe_instances(InstanceIds=[worker])["Reservations"][0][
        "Instances"][0]["State"]["Name"] == "stopped", "the worker stopped", timeout=30,
        interval=0.5)
    result = cluster.up()  # starts it again: blank instance store
    ran = _ran(result)
    assert ran["scratch"] == [2] and ran["efs"] == [2], ran
    assert all(not v for k, v in ran.items() if k not in ("hostname", "scratch", "efs")), ran
    assert cluster.on("worker-2", "sudo -n findmnt -n -o LABEL /scratch").strip() == "ck-scratch"
    assert cluster.on("worker-2", "ls -A /scratch | grep -c before-stop || true").strip() == "0"


def test_a_failed_step_names_node_and_step_and_a_rerun_resumes(cluster: Cluster):
    cluster.up()
    # hosts.sh cannot write /etc/clusterkit/hosts where /etc/clusterkit is a file
    cluster.on("worker-1", "sudo -n mv /etc/clusterkit /etc/clusterkit.saved && "
                           "sudo -n touch /etc/clusterkit")
    try:
        with pytest.raises(BootstrapError) as caught:
            cluster.up("hosts")
        result = caught.value.result
        assert [n.ok for n in result.nodes] == [True, False, True]
        failed = result.nodes[1]
        assert failed.failed_step is not None and failed.failed_step.step == "hosts"
        assert failed.failed_step.output  # the tail of what the playbook said
        assert "worker-1" in caught.value.message and "hosts" in caught.value.message
        assert _ran(result)["hosts"] == [0, 2]

        proc = subprocess.run([CLI, "up", str(cluster.spec), "--yes", "--force-step", "hosts"],
                              capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL, env=os.environ.copy())
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "step hosts" in proc.stderr and "worker-1" in proc.stderr
        assert "Traceback" not in proc.stderr
    finally:
        cluster.on("worker-1", "sudo -n rm /etc/clusterkit && "
                               "sudo -n mv /etc/clusterkit.saved /etc/clusterkit")
    again = cluster.up()
    assert again.bodies_run == 0, _ran(again)


def test_cli_up_renders_every_step(cluster: Cluster):
    cluster.up()
    proc = subprocess.run([CLI, "up", str(cluster.spec), "--yes"], capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL,
                          env=os.environ.copy())
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "every node bootstrapped (3 node(s), 0 step run(s))" in proc.stdout
    for step in STEP_NAMES:
        assert any(line.split()[:1] == [step] for line in proc.stdout.splitlines()), step
    assert "already done on 3" in proc.stdout


def test_facts_and_steps_share_one_ssh_connection_per_node(cluster: Cluster, monkeypatch):
    """An `up` that gathers facts and then runs a step dials the master once and opens one
    channel through it per worker: the step runs on the connection the facts came over
    (counted where the connections are made; the SSH probe dials on its own)."""
    from clusterkit.remote import connect

    dials, tunnels = [], []
    real_dial, real_tunnel = connect.dial, connect._Connection.open_gateway

    def counted_dial(address: str, port: int, timeout: float):
        dials.append(address)
        return real_dial(address, port, timeout)

    def counted_tunnel(self):
        tunnels.append(self.host)
        return real_tunnel(self)

    monkeypatch.setattr(connect, "dial", counted_dial)
    monkeypatch.setattr(connect._Connection, "open_gateway", counted_tunnel)
    result = cluster.up("hostname")
    assert result.by_step()["hostname"][Outcome.RAN] == 3
    assert len(dials) == 1, dials  # the master: the gateway, and its own node
    assert sorted(tunnels) == sorted(set(tunnels)) and len(tunnels) == 2, tunnels


def test_an_image_build_makes_the_env_step_done_on_new_nodes_and_a_changed_list_stale(
        cluster: Cluster):
    """`image build` (a builder node, CreateImage carrying its root file system, the
    builder taken down), `up` of a new cluster on that image (its env step done from the
    image's venv: no install on the node), and a changed package list: the plan says
    the image is stale and why. The wheel comes from the sandbox's package index
    (clusterkit_sandbox.pypi: its shared directory's wheels/; a node has no network)."""
    wheels = shared_dir(cluster.sandbox_dir / "run") / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    filename, data = _wheel("0.3")
    (wheels / filename).write_bytes(data)
    name = support.unique_name("img")
    spec = cluster.spec.parent / f"{name}.yaml"

    def write(version: str) -> None:
        spec.write_text(sandbox_spec(name, count=1, instance_type="i3.large", extra=(
            f"train:\n  framework: mxnet\n  packages: [ckdemo=={version}]\n")))

    write("0.3")
    built = imagebuild.build(runtime(), load(str(spec)), yes=True, timeout=180)
    try:
        assert not built.reused and leftovers(built.builder) == {}  # the builder is gone
        assert imagebuild.build(runtime(), load(str(spec)), yes=True).reused  # no rebuild
        with running(spec, name, timeout=180) as up:
            (node,) = live_instances(name)
            assert node["ImageId"] == built.image_id
            assert up.bootstrap is not None
            (env,) = [s for s in up.bootstrap.nodes[0].steps if s.step == "env"]
            assert env.outcome is Outcome.DONE, env
            (out,) = do_exec(name, ["/opt/clusterkit/envs/current/bin/python -c "
                                    "'import ckdemo; print(ckdemo.VERSION)'"],
                             rt=runtime()).values()
            assert out.stdout == "0.3\n"
        write("0.4")
        notes = do_plan(str(spec), rt=runtime()).notes
        assert f"image {built.image_id} is stale (train.packages changed)" in " ".join(notes)
    finally:
        imagebuild.delete_image(runtime(), "us-east-1", built.image_id)
    assert built.image_id not in {b.candidate.image_id
                                  for b in imagebuild.list_images(runtime(), "us-east-1")}
