"""What a sandbox node sees of this machine's files, and who may log in to it
(clusterkit_sandbox/noderoot.py): real daemon, real sshd nodes on loopback, real OpenSSH
client, real sudo. Every check prints its verdict on the node, so the whole answer is
compared (a missing file and a failing command never read alike)."""

from __future__ import annotations

import shlex
import subprocess
import sysconfig
from pathlib import Path

import pytest

from clusterkit_sandbox import noderoot
from tests import support
from tests.conftest import SandboxCluster

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
CHECKOUT = Path(__file__).resolve().parents[2]


def _verdicts(cluster: SandboxCluster, node, paths: list[Path]) -> list[str]:
    """For each path, as the node's root: "seen" or "unseen"."""
    checks = "; ".join(f"sudo -n test -e {shlex.quote(str(p))} && echo seen || echo unseen"
                       for p in paths)
    return cluster.run(node, checks).stdout.split()


def test_a_node_cannot_read_this_machines_private_files(sandbox_cluster: SandboxCluster,
                                                        tmp_path: Path) -> None:
    """Marker files in the sandbox's state dir, /root, the test's tmp dir, /var/tmp and
    the checkout exist here and not on the node, not even for its root."""
    name = support.unique_name("ck-host-only")
    places = [sandbox_cluster.sandbox.dir / name, Path("/root") / name, tmp_path / name,
              Path("/var/tmp") / name, CHECKOUT / name]
    (node,) = sandbox_cluster.launch(1)
    try:
        for path in places:
            path.write_text("host only\n")
        assert _verdicts(sandbox_cluster, node, places) == ["unseen"] * len(places)
        assert _verdicts(sandbox_cluster, node, [Path("/usr/bin/sudo")]) == ["seen"]
    finally:
        for path in places:
            path.unlink(missing_ok=True)
    assert all(not p.exists() for p in places)


def _listing(cluster: SandboxCluster, node, directory: Path) -> set[str]:
    """The entries of ``directory`` on the node, as its root (none where it is absent)."""
    out = cluster.run(node, f"sudo -n ls -A {shlex.quote(str(directory))} 2>/dev/null; "
                            "echo ck-end")
    assert out.stdout.split()[-1] == "ck-end", out
    return set(out.stdout.split()[:-1])


def test_a_node_has_its_own_secrets_not_this_machines(sandbox_cluster: SandboxCluster):
    """/etc/shadow on the node is its own (no password for anyone), the host's SSH host
    keys are not there, and of this machine's other top-level dirs (the checkout's,
    the machinery's) a node sees nothing but the path to the client's site-packages."""
    (node,) = sandbox_cluster.launch(1)
    shadow = sandbox_cluster.run(node, "sudo -n cat /etc/shadow").stdout.splitlines()
    assert shadow and all(line.split(":")[1] == "*" for line in shadow), shadow
    host_keys = {k.name for k in Path("/etc/ssh").glob("ssh_host_*")}
    assert host_keys and not _listing(sandbox_cluster, node, Path("/etc/ssh")) & host_keys
    site = Path(sysconfig.get_paths()["purelib"])
    for top in (Path("/") / name for name in ("work", "farm", "opt", "srv", "home")):
        if not top.is_dir():
            continue
        below = site.relative_to(top).parts[:1] if site.is_relative_to(top) else ()
        host = {entry.name for entry in top.iterdir()}
        assert _listing(sandbox_cluster, node, top) & host <= set(below), top
    assert _listing(sandbox_cluster, node, CHECKOUT) <= {".venv"}


def test_proc_1_root_is_the_nodes_own_root(sandbox_cluster: SandboxCluster) -> None:
    """A file made at the node's / shows through /proc/1/root; this machine's /proc/1/root
    does not have it, and the node's init is its sshd."""
    (node,) = sandbox_cluster.launch(1)
    marker = support.unique_name("ck-node-root")
    out = sandbox_cluster.run(node, f"sudo -n touch /{marker}; "
                                    f"sudo -n test -e /proc/1/root/{marker} && echo own; "
                                    "sudo -n readlink /proc/1/root; "
                                    "tr '\\0' ' ' < /proc/1/cmdline")
    assert out.stdout.splitlines()[:2] == ["own", "/"], out.stdout
    assert "sshd" in out.stdout.splitlines()[2]
    assert not (Path("/") / marker).exists()


def test_root_cannot_log_in_and_the_login_user_sudoes(sandbox_cluster: SandboxCluster):
    """ssh root@node is refused; ubuntu and ec2-user log in as themselves (not uid 0),
    with their own homes, and `sudo -n` makes them root without a password."""
    (node,) = sandbox_cluster.launch(1)
    refused = subprocess.run(sandbox_cluster.ssh_argv(node, "id -u", "root"),
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 255 and "Permission denied" in refused.stderr
    for offset, user in enumerate(noderoot.LOGIN_USERS):
        out = subprocess.run(sandbox_cluster.ssh_argv(
            node, 'id -u; echo "$HOME"; sudo -n id -u; touch ~/mine && echo home-ok', user),
            capture_output=True, text=True, timeout=60, check=True)
        uid = noderoot.FIRST_UID + offset
        assert out.stdout.split() == [str(uid), f"/home/{user}", "0", "home-ok"], out
    denied = sandbox_cluster.run(node, "touch /etc/ck-not-root", check=False)
    assert denied.returncode != 0 and "Permission denied" in denied.stderr
