"""The node-side playbooks: shellcheck-clean, `set -euo pipefail`, a usage line, and
idempotent. The file-writing ones run here against a temporary root (CLUSTERKIT_ROOT),
fed exactly the commands the pure steps produce, twice: the files are identical after
the second run and each host name appears once; re-reading the written files as node
facts, the steps then say "already done"."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from clusterkit.bootstrap import efa, efa_facts, steps
from clusterkit.bootstrap import facts as nf
from clusterkit.spec import loads
from tests import support
from tests.support import require_root, require_tool

PLAYBOOKS = sorted(steps.PLAYBOOKS_DIR.glob("*.sh"))
NAMES = {p.name for p in PLAYBOOKS}
EXPECTED = {"hostname.sh", "hosts.sh", "ssh.sh", "efa.sh", "scratch.sh", "efs.sh", "dataset.sh",
            "env.sh", "receipt.sh"}
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
    support.shellcheck_clean(*PLAYBOOKS)


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
    return nf.from_outputs({
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


CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"


def _efa_facts_of(root: Path, receipts: list[str] | None = None) -> nf.NodeFacts:
    """A p4d.24xlarge with EFA software (the real fi_info and nvidia-smi captures; the
    module list inline: no capture of it exists), its profile read under ``root`` by the
    fact's own command. The sandbox and this machine have no EFA: only the file is real."""
    command = efa_facts.EFA_PROFILE.command.replace(efa.PROFILE_PATH,
                                                    f"{root}{efa.PROFILE_PATH}")
    profile = subprocess.run(["sh", "-c", command], capture_output=True, text=True)
    return nf.from_outputs({
        "fi_info": (CAPTURES / "p4d.24xlarge.fi_info-efa-rdm.txt").read_text().splitlines(),
        "efa_module": ["efa 163840 0 - Live 0xffffffffc0a6a000"],
        "nvidia_smi": (CAPTURES / "unattributed/p4d.24xlarge-INFERRED.nvidia-smi.txt")
        .read_text().splitlines(),
        "nccl_libs": None, "receipts": receipts,
        "efa_profile": profile.stdout.splitlines() if profile.returncode == 0 else None})


def test_efa_profile_written_once_then_nothing_to_do(node_root: Path):
    cluster = steps.ClusterView("demo", "us-east-1", tuple(
        steps.NodeView(i, n.address, n.host_key, "p4d.24xlarge")
        for i, n in enumerate(CLUSTER.nodes)), 8)
    playbooks = steps.read_playbooks()

    def plan(facts: nf.NodeFacts) -> steps.StepPlan:
        return steps.plan_step("efa", steps.want_efa(facts, SPEC, cluster, 1), facts, playbooks)
    first = plan(_efa_facts_of(node_root))
    assert (first.action, first.reason) == ("run", f"no {efa.PROFILE_PATH}")
    (node_root / "etc/profile.d").mkdir(parents=True)
    _apply(node_root, [first])
    written = node_root / "etc/profile.d/clusterkit-efa.sh"
    assert written.read_text() == first.commands[0].stdin
    assert oct(written.stat().st_mode & 0o777) == "0o644"
    sourced = subprocess.run(["bash", "-c", f". {written}; echo $FI_PROVIDER "
                              "$FI_EFA_USE_DEVICE_RDMA"], capture_output=True, text=True)
    assert sourced.stdout.split() == ["efa", "1"]
    for receipts in (None, ["efa sha256:" + "0" * 64]):  # the file decides, not a receipt
        again = plan(_efa_facts_of(node_root, receipts))
        assert (again.action, again.commands) == ("done", ())
    written.chmod(0o600)
    assert plan(_efa_facts_of(node_root)).reason.endswith("has mode 600, not 644")
    _apply(node_root, [first])
    assert plan(_efa_facts_of(node_root)).action == "done"


def test_efa_profile_removed_once_efa_is_off(node_root: Path):
    (node_root / "etc/profile.d").mkdir(parents=True)
    (node_root / "etc/profile.d/clusterkit-efa.sh").write_text("export FI_PROVIDER=efa\n")
    spec = dataclasses.replace(SPEC, network=dataclasses.replace(SPEC.network, efa="false"))
    cluster = steps.ClusterView("demo", "us-east-1", tuple(
        steps.NodeView(i, n.address, n.host_key, "p4d.24xlarge")
        for i, n in enumerate(CLUSTER.nodes)), 8)
    playbooks = steps.read_playbooks()
    facts = _efa_facts_of(node_root)
    plan = steps.plan_step("efa", steps.want_efa(facts, spec, cluster, 1), facts, playbooks)
    assert plan.action == "run" and plan.commands[0].args == ("--remove",)
    assert plan.reason.startswith("network.efa is false, but")
    _apply(node_root, [plan])
    assert not (node_root / "etc/profile.d/clusterkit-efa.sh").exists()
    facts = _efa_facts_of(node_root)
    again = steps.plan_step("efa", steps.want_efa(facts, spec, cluster, 1), facts, playbooks)
    assert (again.action, again.reason) == ("skip", "network.efa is false")


@pytest.mark.parametrize("stdin", ["export A=$(id)\n", "export A=`id`\n", "rm -rf /\n",
                                   "export A='x'; id\n", ""])
def test_efa_refuses_anything_but_comments_and_plain_exports(node_root: Path, stdin: str):
    out = run("efa.sh", root=node_root, stdin=stdin)
    assert out.returncode == 2, out.stderr
    assert not (node_root / "etc/profile.d/clusterkit-efa.sh").exists()
    assert not list((node_root / "etc").rglob("clusterkit-efa.sh.*"))  # no temp file left


def test_efa_never_writes_through_a_link(node_root: Path):
    (node_root / "etc/profile.d").mkdir(parents=True)
    (node_root / "etc/profile.d/clusterkit-efa.sh").symlink_to(node_root / "etc/hosts")
    before = (node_root / "etc/hosts").read_text()
    out = run("efa.sh", root=node_root, stdin="export FI_PROVIDER=efa\n")
    assert out.returncode == 1 and "not a plain file" in out.stderr
    assert (node_root / "etc/hosts").read_text() == before


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


@pytest.mark.parametrize("planted", [".ssh", ".ssh/config"])
def test_ssh_never_writes_through_a_link_the_user_planted(node_root: Path, planted: str):
    """A login user who points ~/.ssh or ~/.ssh/config at a file of root's (here: a
    stand-in for /etc) gets a refusal, and the target is neither written nor read."""
    target = node_root / "etc-elsewhere"
    target.mkdir()
    (target / "config").write_text("root's own file\n")
    home = node_root / "home/ubuntu"
    (home / ".ssh").mkdir(parents=True)
    link = home / planted
    if planted == ".ssh":
        link.rmdir()
        link.symlink_to(target)
    else:
        link.symlink_to(target / "config")
    out = run("ssh.sh", "--user", "ubuntu", root=node_root,
              stdin=steps.known_hosts_lines(CLUSTER, 22))
    assert out.returncode == 1 and "symbolic link" in out.stderr, out.stderr
    assert (target / "config").read_text() == "root's own file\n"
    assert sorted(p.name for p in target.iterdir()) == ["config"]
    assert link.is_symlink()


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


FAKE_APT = """#!/bin/sh
echo "$*" >> "$CLUSTERKIT_ROOT/apt.log"
case "$1" in
    install) [ -z "$APT_FAILS" ] || exit 100
             mkdir -p "$CLUSTERKIT_ROOT/sbin" && touch "$CLUSTERKIT_ROOT/sbin/mount.efs" &&
             chmod 755 "$CLUSTERKIT_ROOT/sbin/mount.efs";;
esac
"""


def _fake_apt(root: Path) -> None:
    """An apt-get under the node root (efs.sh looks for its package manager there):
    it logs its arguments, and `install` makes mount.efs (fails with APT_FAILS set)."""
    apt = root / "usr/bin/apt-get"
    apt.parent.mkdir(parents=True)
    apt.write_text(FAKE_APT)
    apt.chmod(0o755)


@pytest.mark.parametrize("efs_utils,tls", [(["/sbin/mount.efs"], True), (None, True),
                                           (None, False)],
                         ids=["tls", "tls-installs-efs-utils", "tls-false-plain"])
def test_efs_step_command_writes_the_tls_or_plain_fstab_line(tmp_path: Path,
                                                             efs_utils: list[str] | None,
                                                             tls: bool):
    """The step's own command is what efs.sh writes: TLS through mount.efs, installed
    first (here by a stand-in apt-get) where the node lacks it; plain NFS only with
    `tls: false` (on a file system of the user's own), warned; a plain line is
    replaced by the TLS one, never kept."""
    (tmp_path / "etc").mkdir()
    _fake_apt(tmp_path)
    dns = "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com"
    (tmp_path / "etc/fstab").write_text(f"{dns}:/ /efs nfs4 {steps.EFS_OPTIONS} 0 0\n")
    facts = nf.from_outputs({"efs_utils": efs_utils, "mounts": None,
                                       "boot_id": ["b"], "receipts": None})
    spec = SPEC if tls else dataclasses.replace(SPEC, storage=dataclasses.replace(
        SPEC.storage, efs=dataclasses.replace(SPEC.storage.efs, tls=False,
                                              file_system_id="fs-0123456789abcdef0")))
    [plan] = [steps.plan_step("efs", steps.want_efs(facts, spec, CLUSTER, 1), facts,
                              steps.read_playbooks())]
    assert plan.warning == ("" if tls else steps.EFS_PLAIN_WARNING)
    _apply(tmp_path, [plan])
    line = (tmp_path / "etc/fstab").read_text().splitlines()
    want = (f"{dns}:/ /efs efs {steps.EFS_TLS_OPTIONS} 0 0" if tls
            else f"{dns}:/ /efs nfs4 {steps.EFS_OPTIONS} 0 0")
    assert line == [want]
    installed = (tmp_path / "apt.log").read_text() if (tmp_path / "apt.log").exists() else ""
    assert installed == ("install -y -q amazon-efs-utils\n" if tls and not efs_utils else "")
    assert run("efs.sh", "--type", "cifs", dns, "/efs", root=tmp_path).returncode == 2


@pytest.mark.parametrize("apt", [False, True], ids=["no-package-manager", "apt-finds-none"])
def test_efs_without_efs_utils_that_cannot_be_installed_stops_naming_it(tmp_path: Path,
                                                                        apt: bool):
    """No dnf, yum or apt-get, or an apt-get that finds no amazon-efs-utils (after an
    update): efs.sh exits 1 naming the package and the way out, and writes nothing."""
    (tmp_path / "etc").mkdir()
    if apt:
        _fake_apt(tmp_path)
    dns = "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com"
    out = run("efs.sh", "--type", "efs", "--install-efs-utils", "--options",
              steps.EFS_TLS_OPTIONS, dns, "/efs", root=tmp_path, env={"APT_FAILS": "1"})
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]  # what the bootstrap's error quotes
    assert last.startswith("efs.sh: a TLS mount needs amazon-efs-utils (mount.efs)")
    assert ("apt-get found no package amazon-efs-utils" if apt
            else "the node has no dnf, yum or apt-get") in last
    assert "storage.efs.tls: false" in last
    assert not (tmp_path / "etc/fstab").exists()
    if apt:
        assert (tmp_path / "apt.log").read_text().splitlines() == [
            "install -y -q amazon-efs-utils", "update -q", "install -y -q amazon-efs-utils"]


def test_efs_and_scratch_refuse_a_mount_point_through_a_link(tmp_path: Path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "home/ubuntu").mkdir(parents=True)
    (tmp_path / "home/ubuntu/efs").symlink_to(tmp_path / "etc")
    dns = "fs-0123456789abcdef0.efs.us-east-1.amazonaws.com"
    out = run("efs.sh", dns, "/home/ubuntu/efs/sub", root=tmp_path)
    assert out.returncode == 1 and "/home/ubuntu/efs is a symbolic link" in out.stderr
    assert not (tmp_path / "etc/fstab").exists()
    link = tmp_path / "scratch-link"
    link.symlink_to(tmp_path / "etc")
    out = run("scratch.sh", "--mount", str(link), "--owner", "ubuntu", "/dev/null")
    assert out.returncode == 1 and "is a symbolic link" in out.stderr


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


def _wheel(where: Path) -> Path:
    """A one-module wheel (ckwheel 0.1) pip installs without an index."""
    import base64
    import zipfile

    files = {"ckwheel.py": "VERSION = '0.1'\n",
             "ckwheel-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: ckwheel\n"
                                               "Version: 0.1\n",
             "ckwheel-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\n"
                                            "Root-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{name},sha256={base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=').decode()},{len(text)}\n"
                     for name, text in files.items()) + "ckwheel-0.1.dist-info/RECORD,,\n"
    path = where / "ckwheel-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in {**files, "ckwheel-0.1.dist-info/RECORD": record}.items():
            zf.writestr(name, text)
    return path


@pytest.fixture
def efs_mount(tmp_path: Path):
    """A tmpfs standing in for the mounted EFS (root's, sticky, as efs.sh leaves it)."""
    require_root("a tmpfs mount")
    mnt = tmp_path / "efs"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=1775", "tmpfs", str(mnt)],
                   check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _env_on(node: Path, cache: Path, links: Path) -> subprocess.CompletedProcess[str]:
    key = steps.packages_hash(["ckwheel==0.1"])
    return run("env.sh", "--python", shutil.which("python3") or "python3", "--hash", key,
               "--owner", "root", "--shared-cache", str(cache), root=node,
               stdin="ckwheel==0.1\n", env={"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links),
                                            "PIP_DISABLE_PIP_VERSION_CHECK": "1"})


def test_env_wheel_cache_is_roots_and_every_wheel_is_checked(tmp_path: Path, efs_mount: Path):
    """The first node fills a root-owned cache with a SHA256SUMS; a second node installs
    from it; a tampered wheel (or a file slipped in) stops the next node with exit 1,
    before it builds an env; a cache directory the login user could change is not used
    at all."""
    links = tmp_path / "index"
    links.mkdir()
    _wheel(links)
    cache = efs_mount / steps.WHEEL_CACHE
    first = _env_on(tmp_path / "node1", cache, links)
    assert first.returncode == 0, first.stderr
    [shared] = [p for p in cache.iterdir() if p.is_dir()]
    sums = (shared / "SHA256SUMS").read_text().split()
    assert sums[1] == "ckwheel-0.1-py3-none-any.whl" and len(sums) == 2
    for path in (efs_mount / ".clusterkit", cache, shared):
        assert path.stat().st_uid == 0 and not path.stat().st_mode & 0o022, path
    links.joinpath("ckwheel-0.1-py3-none-any.whl").unlink()  # only the cache has it now
    assert _env_on(tmp_path / "node2", cache, links).returncode == 0

    with open(shared / "ckwheel-0.1-py3-none-any.whl", "ab") as handle:
        handle.write(b"tampered")
    out = _env_on(tmp_path / "node3", cache, links)
    assert out.returncode == 1 and "does not match its SHA256SUMS" in out.stderr
    # checked before the env is built: a refused cache leaves no half-built env behind
    assert not (tmp_path / "node3" / "opt/clusterkit/envs").exists() or not any(
        (tmp_path / "node3" / "opt/clusterkit/envs").iterdir())
    (shared / "ckwheel-0.1-py3-none-any.whl").unlink()
    (shared / "evil-0.1-py3-none-any.whl").write_bytes(b"x")
    out = _env_on(tmp_path / "node4", cache, links)
    assert out.returncode == 1 and "does not match its SHA256SUMS" in out.stderr

    os.chown(efs_mount / ".clusterkit", 65534, 65534)  # made or taken by someone else
    _wheel(links)
    out = _env_on(tmp_path / "node5", cache, links)
    assert out.returncode == 0 and "not a directory only root may change" in out.stderr


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
    require_root("loop devices")
    for tool in ("losetup", "mkfs.ext4"):
        require_tool(tool)
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


# -- dataset.sh: a clone found by volume id, mounted read-only, checked against its manifest --

VOL_A, VOL_B = "vol-0123456789abcdef0", "vol-0fedcba9876543210"
MANIFEST = ".clusterkit-manifest.json"


def _dataset_tree(root: Path, files: dict[str, bytes], after: dict[str, bytes | None] | None
                  = None) -> str:
    """``files`` under ``root`` with their manifest (the format snapshot-dataset publishes);
    ``after`` then changes (None: removes) files behind the manifest's back. Returns the
    manifest file's sha256."""
    entries = []
    for rel, data in sorted(files.items()):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
        entries.append({"path": rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()})
    text = json.dumps({"version": 1, "files": entries,
                       "total_bytes": sum(e["size"] for e in entries)}, sort_keys=True)
    (root / MANIFEST).write_text(text)
    for rel, data in (after or {}).items():
        if data is None:
            (root / rel).unlink()
        else:
            (root / rel).write_bytes(data)
    return hashlib.sha256(text.encode()).hexdigest()


def _ext4_loop(tmp: Path, name: str, tree: Path) -> str:
    image = tmp / f"{name}.img"
    subprocess.run(["mke2fs", "-q", "-t", "ext4", "-L", "ck-dataset", "-d", str(tree),
                    str(image), "16M"], check=True, capture_output=True)
    device = _loop(image)
    assert device, "losetup found no free loop device"
    return device


def _as_node(tmp: Path, volumes: dict[str, str], script: str) -> str:
    """Run ``script`` as a node would: in a private mount namespace whose /dev is a copy
    with ``volumes`` (vol id -> loop device) under /dev/disk/by-id by their EBS names,
    block device nodes as in the sandbox. Returns its output (stderr merged); nothing it mounts
    outlives it."""
    dev = tmp / "dev"
    dev.mkdir(exist_ok=True)
    nodes = "".join(
        f"mknod {dev}/disk/by-id/{steps.ebs_by_id(vol)} b "
        f"{os.major(os.stat(loop).st_rdev)} {os.minor(os.stat(loop).st_rdev)}\n"
        for vol, loop in volumes.items())
    setup = (f"set -e\nmount -t tmpfs ckdev {dev}\n"
             f"(cd /dev && cp -a null zero full random urandom fd stdin stdout stderr {dev}/)\n"
             f"mkdir -p {dev}/disk/by-id\n{nodes}mount --bind {dev} /dev\nset +e\n")
    out = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c",
                          setup + script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stdout
    return out.stdout


def _dataset_call(mnt: Path, vol: str, *extra: str) -> str:
    args = " ".join(["--mount", str(mnt), "--volume", vol, "--wait", "0", *extra])
    return f"bash {steps.PLAYBOOKS_DIR / 'dataset.sh'} {args}; echo \"@rc $?\"\n"


def _results(output: str) -> list[int]:
    return [int(line.split()[1]) for line in output.splitlines() if line.startswith("@rc ")]


@pytest.fixture
def loops():
    made: list[str] = []
    yield made
    for device in made:
        subprocess.run(["losetup", "-d", device], capture_output=True)


def test_dataset_refuses_bad_arguments_and_names_a_missing_volume(tmp_path: Path):
    for args in (["--mount", "data", "--volume", VOL_A], ["--mount", "/data", "--volume", "vol-1"],
                 ["--mount", "/data", "--volume", VOL_A, "--verify", "quick"],
                 ["--mount", "/data", "--volume", VOL_A, "--manifest-sha256", "ab"],
                 ["--volume", VOL_A], ["--mount", "/data/../etc", "--volume", VOL_A],
                 ["--mount", "/usr/", "--volume", VOL_A]):
        assert run("dataset.sh", *args).returncode == 2, args
    missing = run("dataset.sh", "--mount", str(tmp_path / "data"), "--volume",
                  "vol-0aaaabbbbccccdddd", "--wait", "0")
    assert missing.returncode == 1
    assert "volume vol-0aaaabbbbccccdddd is not visible" in missing.stderr
    assert "is the volume attached? clusterkit status" in missing.stderr
    assert not (tmp_path / "data").exists()


@pytest.mark.root
def test_dataset_mounts_by_id_read_only_verifies_and_swaps(tmp_path: Path, loops: list[str]):
    """A clone (a loop device under its by-id name) is mounted ro,noatime and verified
    (sha256, with the manifest's digest, after a prewarm); a second run only checks; the
    pure step then says done; a new clone on the same path replaces the old one."""
    require_root("mounting dataset clones")
    files = {"train.rec": os.urandom(300_000), "train.idx": b"0\t0\n1\t4096\n",
             "val/val.rec": os.urandom(5000)}
    sha_a = _dataset_tree(tmp_path / "a", files)
    _dataset_tree(tmp_path / "b", {"other.rec": b"x" * 1234})
    loops += [_ext4_loop(tmp_path, "a", tmp_path / "a"), _ext4_loop(tmp_path, "b", tmp_path / "b")]
    mnt = tmp_path / "data"
    view = steps.DatasetView(str(mnt), {1: VOL_A}, sha_a, "full", prewarm=True)
    cluster = steps.ClusterView("demo", "us-east-1", CLUSTER.nodes, dataset=view)
    gather = nf.gather_script([nf.DISKS_BY_ID, nf.MOUNTS])
    out = _as_node(tmp_path, {VOL_A: loops[0], VOL_B: loops[1]}, (
        f"sh -c {shlex.quote(gather)}; echo @facts-end\n"
        + _dataset_call(mnt, VOL_A, "--verify", "full", "--manifest-sha256", sha_a, "--prewarm")
        + f"echo @findmnt; findmnt -J -o TARGET,SOURCE,FSTYPE,OPTIONS,LABEL {mnt}; "
        "echo @findmnt\n"
        + f"touch {mnt}/written 2>/dev/null && echo @writable\n"
        + f"sh -c {shlex.quote(gather)}; echo @facts-end\n"
        + _dataset_call(mnt, VOL_A, "--verify", "full", "--manifest-sha256", sha_a)
        + _dataset_call(mnt, VOL_B)
        + f"echo @sources $(findmnt -n -o SOURCE --mountpoint {mnt} | wc -l) "
        f"$(findmnt -n -o SOURCE --mountpoint {mnt})\n"))
    assert _results(out) == [0, 0, 0], out
    first, second, third = out.split("@rc ")[:3]
    assert f"mounted {VOL_A}" in first and "prewarmed" in first and "MB/s" in first
    assert first.rstrip().splitlines()[-1] == (
        f"dataset: verified 3 files, 305.0 kB (sha256) manifest sha256:{sha_a[:12]}")
    assert "@writable" not in out
    shown = out.split("@findmnt\n")[1]
    mount = nf.mount_at(nf.parse_mounts(shown.splitlines()), str(mnt))
    assert mount is not None and mount.label == "ck-dataset"
    assert {"ro", "noatime"} <= set(mount.options)
    assert mount.source == f"/dev/disk/by-id/{steps.ebs_by_id(VOL_A)}"
    assert f"{VOL_A} is mounted on {mnt}" in second and "mounted " + VOL_A not in second
    assert "unmounting it" in third and third.rstrip().splitlines()[-1].startswith(
        "dataset: verified 1 files, 1.2 kB (size) manifest sha256:")
    assert f"@sources 1 /dev/disk/by-id/{steps.ebs_by_id(VOL_B)}" in out

    before, after = (nf.parse_gathered(part.splitlines(), [nf.DISKS_BY_ID, nf.MOUNTS])
                     for part in out.split("@facts-end")[:2])
    playbooks = steps.read_playbooks()
    plans = []
    for found in (before, after):
        facts = nf.NodeFacts({**found.values, "receipts": {}})
        key = steps.plan_step("dataset", steps.want_dataset(facts, SPEC, cluster, 1), facts,
                              playbooks).digest
        facts = nf.NodeFacts({**found.values, "receipts": {"dataset": key}})
        plans.append(steps.plan_step("dataset", steps.want_dataset(facts, SPEC, cluster, 1),
                                     facts, playbooks))
    assert (plans[0].action, plans[0].reason) == ("run", f"receipt matches but {mnt} is not mounted")
    assert (plans[1].action, plans[1].reason) == (
        "done", "receipt matches, and the system shows it")


@pytest.mark.root
def test_dataset_mismatches_name_the_file_and_a_read_write_mount_is_left(tmp_path: Path,
                                                                          loops: list[str]):
    require_root("mounting dataset clones")
    same_size = os.urandom(2000)
    sha = _dataset_tree(tmp_path / "bad", {"a.rec": os.urandom(2000), "b.rec": b"b" * 10,
                                           "c.rec": b"c"},
                        after={"a.rec": same_size, "b.rec": b"b" * 11, "c.rec": None})
    _dataset_tree(tmp_path / "mine", {"notes.txt": b"user data"})
    loops += [_ext4_loop(tmp_path, "bad", tmp_path / "bad"),
              _ext4_loop(tmp_path, "mine", tmp_path / "mine")]
    mnt = tmp_path / "data"
    mine = f"/dev/disk/by-id/{steps.ebs_by_id(VOL_B)}"
    out = _as_node(tmp_path, {VOL_A: loops[0], VOL_B: loops[1]}, (
        _dataset_call(mnt, VOL_A) + "echo @next\n"
        + _dataset_call(mnt, VOL_A, "--verify", "full") + "echo @next\n"
        + _dataset_call(mnt, VOL_A, "--manifest-sha256", "0" * 64) + "echo @next\n"
        + f"umount {mnt}\nmount {mine} {mnt}\n"
        + _dataset_call(mnt, VOL_A)
        + f"echo @still $(findmnt -n -o SOURCE --mountpoint {mnt})\n"))
    assert _results(out) == [1, 1, 1, 1], out
    size, full, manifest, rw = out.split("@next")
    assert "dataset: MISMATCH b.rec: size 11, manifest says 10" in size
    assert "dataset: MISMATCH c.rec: missing" in size
    assert "a.rec" not in size  # same size: only a full check sees it
    assert "dataset: MISMATCH a.rec: sha256 " in full and "b.rec: size 11" in full
    assert f"MISMATCH {MANIFEST}: sha256 {sha[:12]}, the snapshot's tag says 000000000000" \
        in manifest
    assert "read-write, not a dataset clone; leaving it" in rw
    assert f"@still {mine}" in rw


@pytest.mark.root
def test_dataset_step_runs_through_the_node_script_and_leaves_its_receipt(
        tmp_path: Path, loops: list[str]):
    """The pure step's commands, wrapped by bootstrap's node script exactly as `up` sends
    them (the playbook text through ``bash -c``), against a manifest written by
    snapshot-dataset's own module: mounted, verified, receipt written."""
    require_root("mounting dataset clones")
    from clusterkit.bootstrap import run as bootstrap_run
    from clusterkit.dataset import manifest

    (tmp_path / "a/val").mkdir(parents=True)
    (tmp_path / "a/val/x.rec").write_bytes(os.urandom(100_000))
    published = manifest.build(tmp_path / "a")
    manifest.write(tmp_path / "a", published)
    sha = published.digest
    loops.append(_ext4_loop(tmp_path, "a", tmp_path / "a"))
    view = steps.DatasetView(str(tmp_path / "data"), {1: VOL_A}, sha, "full", prewarm=True)
    cluster = steps.ClusterView("demo", "us-east-1", CLUSTER.nodes, dataset=view)
    playbooks = steps.read_playbooks()
    facts = nf.from_outputs({"disks_by_id": None, "mounts": None, "receipts": None})
    plan = steps.plan_step("dataset", steps.want_dataset(facts, SPEC, cluster, 1), facts,
                           playbooks)
    script = bootstrap_run.node_script([plan], playbooks)
    out = _as_node(tmp_path, {VOL_A: loops[0]}, f"export CLUSTERKIT_ROOT={tmp_path}/root\n"
                   f"sh -c {shlex.quote(script)}\n")
    code, tail = bootstrap_run.parse_run(out.splitlines())["dataset"]
    assert code == 0, out
    assert tail.splitlines()[-1] == (f"dataset: verified 1 files, 100.0 kB (sha256) "
                                     f"manifest sha256:{sha[:12]}")
    receipt = tmp_path / "root/var/lib/clusterkit/steps/dataset"
    assert receipt.read_text() == f"{plan.digest}\n"
