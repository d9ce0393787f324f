"""clusterkit_sandbox/noderoot.py: a node's root file system as the host builds it (in a
temp dir, no mount): its accounts, sudoers, and what of the host it hides. Root: the
login users' homes are chowned, whiteouts are device nodes, opaque dirs trusted xattrs."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from clusterkit_sandbox import noderoot

pytestmark = [pytest.mark.root]
KEYS = ["ssh-ed25519 AAAAkeypair k", "ssh-ed25519 AAAAuserdata controller "]


@pytest.fixture
def built(tmp_path: Path) -> Path:
    node = tmp_path / "nodes" / "i-1"
    noderoot.build(node, tmp_path / "run", "ip-10-0-0-9", "127.0.0.9", KEYS)
    return node


def _lines(node: Path, path: str) -> dict[str, list[str]]:
    text = noderoot.stored(node, path).read_text()
    return {line.split(":")[0]: line.split(":") for line in text.splitlines()}


def test_the_login_users_are_not_root_and_have_homes_of_their_own(built: Path):
    passwd = _lines(built, "/etc/passwd")
    for offset, user in enumerate(noderoot.LOGIN_USERS):
        uid = str(noderoot.FIRST_UID + offset)
        assert passwd[user][2:4] == [uid, uid] and passwd[user][5] == f"/home/{user}"
        assert _lines(built, "/etc/group")[user][2] == uid
        home = noderoot.fs_dir(built) / "home" / user
        assert (home.stat().st_uid, stat.S_IMODE(home.stat().st_mode)) == (int(uid), 0o750)
        keys = home / ".ssh" / "authorized_keys"  # as cloud-init writes them
        assert keys.read_text().splitlines() == [k.strip() for k in KEYS]
        assert (keys.stat().st_uid, stat.S_IMODE(keys.stat().st_mode)) == (int(uid), 0o600)
    people = {name for name, f in passwd.items()
              if noderoot.FIRST_UID <= int(f[2]) < 60000} - set(noderoot.LOGIN_USERS)
    assert passwd["root"][2] == "0" and not people  # none of this machine's people
    shadow = _lines(built, "/etc/shadow")
    assert set(shadow) == set(passwd) and {f[1] for f in shadow.values()} == {"*"}


def test_sudo_is_passwordless_for_the_login_users_only(built: Path):
    sudoers = noderoot.stored(built, "/etc/sudoers")
    cloud = noderoot.stored(built, "/" + noderoot.CLOUD_INIT_SUDOERS)
    assert stat.S_IMODE(sudoers.stat().st_mode) == stat.S_IMODE(cloud.stat().st_mode) == 0o440
    assert "@includedir /etc/sudoers.d" in sudoers.read_text()
    rules = [line for line in cloud.read_text().splitlines() if not line.startswith("#")]
    assert rules == [f"{u} ALL=(ALL) NOPASSWD:ALL" for u in noderoot.LOGIN_USERS]
    # the host's own sudoers.d entries do not show
    assert os.getxattr(cloud.parent, "trusted.overlay.opaque") == b"y"


def test_the_hosts_secrets_in_etc_are_whiteouts(built: Path):
    keys = sorted(Path("/etc/ssh").glob("ssh_host_*"))
    if not keys:
        pytest.skip("this machine has no SSH host keys")
    for key in keys:
        mode = noderoot.stored(built, str(key)).lstat()
        assert stat.S_ISCHR(mode.st_mode) and mode.st_rdev == 0, key


def test_the_nodes_own_tree_has_only_its_own_top_level(built: Path):
    fs = noderoot.fs_dir(built)
    top = {p.name for p in fs.iterdir()}
    assert {"root", "home", "tmp", "var", "opt", "run", "usr", "etc"} <= top
    assert not top & {"work", "farm", "srv-of-host"} and not any((fs / "opt").iterdir())
    assert stat.S_IMODE((fs / "tmp").stat().st_mode) == 0o1777
    assert os.readlink(fs / "var/run") == "/run"


def test_the_sandboxs_own_paths_in_a_shown_tree_are_hidden(tmp_path: Path, monkeypatch):
    """A state dir or checkout under /usr (as unlikely as it is) is an opaque dir in the
    node's /usr layer; one in a read-only shown path is covered by an empty tmpfs."""
    monkeypatch.setattr(noderoot, "sandbox_paths",
                        lambda run: [Path("/usr/share"), Path("/var/cache/clusterkit")])
    node = tmp_path / "n"
    noderoot.hide(node, tmp_path / "run")
    opaque = node / "layers" / "usr" / "upper" / "share"
    assert os.getxattr(opaque, "trusted.overlay.opaque") == b"y"
    masks = noderoot.masks(tmp_path / "run", "/m")
    assert masks == (["mount -t tmpfs -o ro,size=4k,mode=755 ckmask /m/var/cache/clusterkit"]
                     if Path("/var/cache/clusterkit").is_dir() else [])


def test_a_node_path_is_stored_in_its_tree_or_its_layer(tmp_path: Path):
    assert noderoot.stored(tmp_path, "/etc/passwd") == tmp_path / "layers/etc/upper/passwd"
    assert noderoot.stored(tmp_path, "/root/x") == tmp_path / "fs/root/x"
    assert noderoot.stored(tmp_path, "/usr") == tmp_path / "layers/usr/upper"
