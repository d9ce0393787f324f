"""The node-side playbooks: shellcheck-clean, `set -euo pipefail`, a usage line, and
idempotent. The file-writing ones run here against a temporary root (CLUSTERKIT_ROOT),
fed exactly the commands the pure steps produce, twice: the files are identical after
the second run and each host name appears once; re-reading the written files as node
facts, the steps then say "already done"."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterkit.bootstrap import facts as nf
from clusterkit.bootstrap import steps
from clusterkit.spec import loads

PLAYBOOKS = sorted(steps.PLAYBOOKS_DIR.glob("*.sh"))
NAMES = {p.name for p in PLAYBOOKS}
EXPECTED = {"hostname.sh", "hosts.sh", "ssh.sh", "scratch.sh", "efs.sh", "env.sh", "receipt.sh"}
SPEC = loads(yaml.safe_dump({
    "name": "demo", "region": "us-east-1",
    "nodes": {"count": 3, "instance_types": ["p4d.24xlarge"]}, "ssh": {"user": "ubuntu"},
    "storage": {"efs": {"mount": "/efs"}}}))
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"
CLUSTER = steps.ClusterView("demo", "us-east-1", tuple(
    steps.NodeView(i, f"127.0.0.{2 + i}", KEY + "ABC"[i] * 32) for i in range(3)), 8,
    "fs-0123456789abcdef0")


def run(name: str, *args: str, root: Path | None = None, stdin: str | None = None,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, **(env or {})}
    if root is not None:
        environ["CLUSTERKIT_ROOT"] = str(root)
    return subprocess.run(["bash", str(steps.PLAYBOOKS_DIR / name), *args], input=stdin or "",
                          capture_output=True, text=True, env=environ, timeout=60)


def test_one_playbook_per_step():
    assert NAMES == EXPECTED
    assert {f"{name}.sh" for name in steps.STEP_NAMES} | {"receipt.sh"} == EXPECTED


def test_shellcheck_clean():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        if os.environ.get("CI") == "true":
            pytest.fail("shellcheck is missing on CI (apt-get install -y shellcheck)")
        pytest.skip("shellcheck not installed")
    out = subprocess.run([shellcheck, "--shell=bash", *map(str, PLAYBOOKS)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("path", PLAYBOOKS, ids=lambda p: p.name)
def test_header_strict_mode_and_usage(path: Path):
    lines = path.read_text().splitlines()
    assert lines[0] == "#!/usr/bin/env bash"
    assert "set -euo pipefail" in lines
    assert any(line.startswith(f"# usage: {path.name}") for line in lines[:3]), path.name
    helped = run(path.name, "--help")
    assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {path.name}")
    wrong = run(path.name, "--no-such-option", "x", "y", "z")
    assert wrong.returncode == 2 and "usage:" in wrong.stderr


def test_playbooks_fit_on_a_command_line():
    for path in PLAYBOOKS:  # Command.shell passes the text as one argument
        assert len(path.read_bytes()) < 100_000


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _plan(facts: nf.NodeFacts, only: set[str]) -> list[steps.StepPlan]:
    """The file-writing steps for worker 1 (the others need devices and a network)."""
    playbooks = steps.read_playbooks()
    return [steps.plan_step(name, fn(facts, SPEC, CLUSTER, 1), facts, playbooks)
            for name, fn in steps.STEPS if name in only]


def _apply(root: Path, plans: list[steps.StepPlan]) -> None:
    for plan in plans:
        for command in plan.commands:
            out = run(command.playbook, *command.args, root=root, stdin=command.stdin)
            assert out.returncode == 0, (command.playbook, out.stderr)


def _facts_of(root: Path) -> nf.NodeFacts:
    receipts = root / "var/lib/clusterkit/steps"
    return nf.NodeFacts.from_outputs({
        "hostname": (root / "etc/hostname").read_text().splitlines(),
        "hosts_file": (root / "etc/hosts").read_text().splitlines(),
        "receipts": [f"{p.name} {p.read_text().strip()}" for p in sorted(receipts.iterdir())]
        if receipts.is_dir() else None,
    })


@pytest.fixture
def node_root(tmp_path: Path) -> Path:
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hosts").write_text(
        "127.0.0.1\tlocalhost\n127.0.0.3\tdemo-worker-1\n"  # what the sandbox boots with
        "10.0.1.5\tdeeplearning-master\n10.0.1.5\tdeeplearning-master\n"  # template appends
        "::1 ip6-localhost ip6-loopback # keep me\n")
    (tmp_path / "etc/hostname").write_text("ip-10-0-1-6\n")
    return tmp_path


def test_steps_then_playbooks_twice_is_idempotent_and_then_done(node_root: Path):
    only = {"hostname", "hosts", "ssh"}
    first = _plan(_facts_of(node_root), only)
    assert {p.step: p.action for p in first} == dict.fromkeys(only, "run")
    _apply(node_root, first)
    once = _snapshot(node_root)
    _apply(node_root, first)
    assert _snapshot(node_root) == once

    hosts = nf.parse_hosts((node_root / "etc/hosts").read_text().splitlines())
    names = hosts.names()
    for index in range(3):
        for name in steps.host_names("demo", index):
            assert names.count(name) == 1, name
    assert "deeplearning-worker2" in names and "localhost" in names
    assert "::1 ip6-localhost ip6-loopback # keep me" in (node_root / "etc/hosts").read_text()
    assert (node_root / "etc/clusterkit/hosts").read_text() == "127.0.0.2\n127.0.0.3\n127.0.0.4\n"
    profile = (node_root / "etc/profile.d/clusterkit.sh").read_text()
    for line in ("export DEEPLEARNING_WORKERS_PATH=/etc/clusterkit/hosts",
                 "export DEEPLEARNING_WORKERS_COUNT=3", "export DEEPLEARNING_WORKER_GPU_COUNT=8",
                 "export CLUSTERKIT_NODE_RANK=1", "export CLUSTERKIT_NUM_NODES=3",
                 "export CLUSTERKIT_NODE_IPS=127.0.0.2,127.0.0.3,127.0.0.4",
                 "export EFS_MOUNT=/efs"):
        assert line in profile.splitlines()
    profile_env = subprocess.run(["bash", "-c", f". {node_root}/etc/profile.d/clusterkit.sh; "
                                  "echo $CLUSTERKIT_NODE_IPS"], capture_output=True, text=True)
    assert profile_env.stdout.strip() == "127.0.0.2,127.0.0.3,127.0.0.4"
    assert (node_root / "etc/hostname").read_text() == "demo-worker-1\n"

    known = (node_root / "etc/clusterkit/known_hosts").read_text().splitlines()
    assert known[1] == f"deeplearning-worker1,worker-1,demo-worker-1,127.0.0.3 {KEY}{'B' * 32}"
    config = (node_root / "home/ubuntu/.ssh/config").read_text()
    assert config.count("# BEGIN clusterkit") == 1
    for word in ("ForwardAgent yes", "StrictHostKeyChecking yes",
                 "UserKnownHostsFile /etc/clusterkit/known_hosts", "deeplearning-worker2"):
        assert word in config
    assert "PRIVATE KEY" not in "".join(p.read_text() for p in node_root.rglob("*") if p.is_file())

    again = _plan(_facts_of(node_root), only)
    assert {p.step: p.action for p in again} == dict.fromkeys(only, "done")


def test_ssh_config_keeps_the_users_own_entries(node_root: Path):
    ssh_dir = node_root / "home/ubuntu/.ssh"
    ssh_dir.mkdir(parents=True)
    (ssh_dir / "config").write_text("Host github.com\n    User git\n")
    stdin = steps.known_hosts_lines(CLUSTER, 22)
    for _ in range(2):
        assert run("ssh.sh", "--user", "ubuntu", root=node_root, stdin=stdin).returncode == 0
    config = (ssh_dir / "config").read_text()
    assert config.startswith("# BEGIN clusterkit") and config.endswith("Host github.com\n    User git\n")
    assert config.count("Host github.com") == 1


def test_ssh_refuses_anything_but_known_hosts_lines(node_root: Path):
    out = run("ssh.sh", "--user", "ubuntu", root=node_root,
              stdin="-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n")
    assert out.returncode == 2 and not (node_root / "etc/clusterkit/known_hosts").exists()


def test_hosts_refuses_bad_input(node_root: Path):
    before = _snapshot(node_root)
    assert run("hosts.sh", "--rank", "0", "--gpus", "0", root=node_root,
               stdin="10.0.0.1 ok; rm -rf /\n").returncode == 2
    assert run("hosts.sh", "--rank", "5", "--gpus", "0", root=node_root,
               stdin="10.0.0.1 a\n").returncode == 2
    assert _snapshot(node_root) == before


def test_efs_fstab_line_replaced_never_duplicated(tmp_path: Path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/fstab").write_text("LABEL=cloudimg-rootfs / ext4 defaults 0 1\n"
                                        "fs-0aaa.efs.us-east-1.amazonaws.com:/ /efs nfs4 defaults 0 0\n")
    dns = "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com"
    for _ in range(2):
        out = run("efs.sh", "--owner", "ubuntu", "--options", steps.EFS_OPTIONS, dns, "/efs",
                  root=tmp_path)
        assert out.returncode == 0, out.stderr
    assert (tmp_path / "etc/fstab").read_text() == (
        "LABEL=cloudimg-rootfs / ext4 defaults 0 1\n"
        f"{dns}:/ /efs nfs4 {steps.EFS_OPTIONS} 0 0\n")
    assert run("efs.sh", "fs-1.example.com", "/efs", root=tmp_path).returncode == 2


def test_receipt_written_atomically_and_checked(tmp_path: Path):
    digest = "sha256:" + "ab" * 32
    for _ in range(2):
        assert run("receipt.sh", "hosts", digest, root=tmp_path).returncode == 0
    assert (tmp_path / "var/lib/clusterkit/steps/hosts").read_text() == digest + "\n"
    assert sorted(p.name for p in (tmp_path / "var/lib/clusterkit/steps").iterdir()) == ["hosts"]
    assert run("receipt.sh", "../x", digest, root=tmp_path).returncode == 2
    assert run("receipt.sh", "hosts", "sha256:nothex", root=tmp_path).returncode == 2


def test_env_complete_is_never_rebuilt(tmp_path: Path):
    key = steps.packages_hash(["torch==2.3.1"])
    venv = tmp_path / "opt/clusterkit/envs" / key
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").write_text("#!/bin/sh\n")
    (venv / "bin/python").chmod(0o755)
    (venv / ".clusterkit-packages").write_text(key + "\n")
    for _ in range(2):
        out = run("env.sh", "--python", "/nonexistent/python3", "--hash", key, "--owner",
                  "ubuntu", root=tmp_path, stdin="torch==2.3.1\n")
        assert out.returncode == 0 and "is complete" in out.stdout, out.stderr
    assert os.readlink(tmp_path / "opt/clusterkit/envs/current") == str(venv)


def test_scratch_without_md_is_not_emulated(tmp_path: Path):
    devices = [d for d in ("/dev/loop0", "/dev/loop1") if Path(d).is_block_device()]
    if len(devices) < 2 or (Path("/proc/mdstat").exists() and shutil.which("mdadm")):
        pytest.skip("needs two block devices and no md support on this machine")
    out = run("scratch.sh", "--mount", str(tmp_path / "scratch"), "--owner", "ubuntu",
              *devices, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 3 and "not emulated" in out.stderr
    assert not (tmp_path / "scratch").exists()


def test_scratch_refuses_no_devices_and_relative_mount():
    assert run("scratch.sh", "--mount", "/scratch", "--owner", "ubuntu").returncode == 2
    assert run("scratch.sh", "--mount", "scratch", "--owner", "ubuntu", "/dev/x").returncode == 2


def _loop(image: Path) -> str | None:
    out = subprocess.run(["losetup", "--find", "--show", str(image)], capture_output=True,
                         text=True)
    return out.stdout.strip() if out.returncode == 0 else None


@pytest.mark.root
def test_scratch_one_disk_for_real_then_kept_then_foreign_refused(tmp_path: Path):
    """As root with loop devices: one blank disk gets ck-scratch, mounted noatime; a second
    run and a remount after unmounting keep it (no mkfs); a disk holding someone else's
    filesystem is refused and left untouched."""
    if os.geteuid() != 0 or not shutil.which("losetup") or not shutil.which("mkfs.ext4"):
        pytest.skip("needs root, losetup and mkfs.ext4")
    blank, foreign = tmp_path / "blank.img", tmp_path / "foreign.img"
    for image in (blank, foreign):
        with open(image, "wb") as handle:
            handle.truncate(64 << 20)
    subprocess.run(["mkfs.ext4", "-q", "-L", "userdata", str(foreign)], check=True)
    mnt = tmp_path / "scratch"
    devices = [d for d in (_loop(blank), _loop(foreign)) if d]
    try:
        if len(devices) < 2:
            pytest.skip("no loop devices here")
        for _ in range(2):
            out = run("scratch.sh", "--mount", str(mnt), "--owner", "root", devices[0])
            assert out.returncode == 0, out.stderr
        shown = subprocess.run(["findmnt", "-J", "-o", "TARGET,SOURCE,FSTYPE,OPTIONS,LABEL",
                                str(mnt)], capture_output=True, text=True).stdout
        mount = nf.mount_at(nf.parse_mounts(shown.splitlines()), str(mnt))
        assert mount and mount.label == steps.SCRATCH_LABEL and "noatime" in mount.options
        (mnt / "kept").write_text("x")
        subprocess.run(["umount", str(mnt)], check=True)
        assert run("scratch.sh", "--mount", str(mnt), "--owner", "root",
                   devices[0]).returncode == 0
        assert (mnt / "kept").read_text() == "x"  # a reboot keeps the data
        subprocess.run(["umount", str(mnt)], check=True)
        out = run("scratch.sh", "--mount", str(tmp_path / "other"), "--owner", "root",
                  devices[1])
        assert out.returncode == 1 and "refusing" in out.stderr
        label = subprocess.run(["blkid", "-p", "-o", "value", "-s", "LABEL", devices[1]],
                               capture_output=True, text=True).stdout.strip()
        assert label == "userdata"
    finally:
        subprocess.run(["umount", str(mnt)], capture_output=True)
        for device in devices:
            subprocess.run(["losetup", "-d", device], capture_output=True)
