"""A sandbox node's root file system: what of this machine a node sees, and its logins.

**An allow-list, not a mask-list.** The node's ``/`` is a directory of its own (``fs/``
in the node's dir: its ``/root``, ``/home``, ``/tmp``, ``/var``, ``/opt``, ``/run``, ...;
kept over stop/start like a root volume, gone on terminate). Of this machine it gets only
the OS trees ``SHOWN_TREES`` (``/usr``, ``/etc`` and, on a host without merged /usr,
``/bin`` ``/sbin`` ``/lib*``), each as an overlay whose upper layer is the node's
(``layers/<tree>/``: what the node writes there stays its own), and ``SHOWN_READ_ONLY``
(the torch venv in ``/var/cache/clusterkit``, dpkg's database) bound read-only. A mask-list
would have to name everything secret a machine holds: the user's checkout, the sandbox's
state dir, a database under ``/var/lib``, whatever a later tool puts at the top of ``/``
(this machine has ``/work``, ``/farm``, ``/opt/...``); one forgotten path and every node
reads it. The allow-list names what a node needs to run and nothing else shows, whatever
the machine holds or gains later. Hidden inside the shown trees (``hide``, overlay
whiteouts and opaque directories in the node's upper layer, so no ``umount`` in the node
uncovers them): ``/etc/shadow`` and ``gshadow`` (and their ``-`` backups), the host's
SSH host keys and its sudoers (the node gets its own), and the sandbox's state dir and
the checkout should they lie in a shown tree. The client's site-packages (MXNet for
sandbox jobs: the nodes run the system python with them on PYTHONPATH) are bound
read-only at their own path (``client_packages_mount``), nothing else of the checkout.

**Logins, as on an EC2 image.** ``ubuntu`` and ``ec2-user`` are uid ``FIRST_UID`` and
the next, each with its own ``/home/<user>``, the instance's keys in its
``~/.ssh/authorized_keys`` (as cloud-init puts them), and passwordless ``sudo`` (the real
``/usr/bin/sudo``, setuid, reading the node's own ``/etc/sudoers`` and
``/etc/sudoers.d/90-cloud-init-users``); root cannot log in (``PermitRootLogin no`` in
``node.SSHD_CONFIG``). The node's ``/etc/passwd`` and ``/etc/group`` keep the host's
system accounts (ids below 1000, and nobody) and none of its people; its ``/etc/shadow``
gives every account ``*`` (no password; not ``!``, which sshd without PAM reads as a
locked account).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import stat
import subprocess
import sysconfig
from collections.abc import Iterator
from pathlib import Path

LOGIN_USERS = ("ubuntu", "ec2-user")
FIRST_UID = 1000  # ubuntu's on an Ubuntu image, ec2-user's on Amazon Linux
# what of this machine every node shows: these top-level trees as overlays (a symlink
# among them, merged /usr's /bin -> usr/bin, is made again in the node) ...
SHOWN_TREES = ("usr", "etc", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
# ... and these read-only: the torch venv of the torch tests (scripts/install.sh puts it
# here for the nodes), dpkg's database (`dpkg -s` on a node)
SHOWN_READ_ONLY = ("var/cache/clusterkit", "var/lib/dpkg")
# the host's files in /etc no node reads: password hashes, its SSH host keys (globbed at
# every boot), its sudoers (the node has its own)
HIDDEN_IN_ETC = ("shadow-", "gshadow-", "ssh/ssh_host_*", "security/opasswd")
# the node's own top-level directories (mode), made at first boot; the mount points of
# the shown trees and of /proc /sys /dev are made beside them
OWN_DIRS = {"root": 0o700, "home": 0o755, "tmp": 0o1777, "var": 0o755, "var/tmp": 0o1777,
            "var/lib": 0o755, "var/log": 0o755, "var/cache": 0o755, "opt": 0o755,
            "mnt": 0o755, "srv": 0o755, "media": 0o755, "run": 0o755, "proc": 0o555,
            "sys": 0o555, "dev": 0o755}
OWN_LINKS = {"var/run": "/run", "var/lock": "/run/lock"}
SUDOERS = """\
# clusterkit sandbox node: sudo as on an EC2 image
Defaults\tenv_reset
Defaults\tsecure_path="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
root\tALL=(ALL:ALL) ALL
@includedir /etc/sudoers.d
"""
CLOUD_INIT_SUDOERS = "etc/sudoers.d/90-cloud-init-users"


def fs_dir(node_dir: Path) -> Path:
    """The node's own ``/`` (its top-level directories)."""
    return node_dir / "fs"


def layer(node_dir: Path, tree: str) -> Path:
    """The upper and work directories of the overlay of the host's ``/<tree>``."""
    return node_dir / "layers" / tree


def stored(node_dir: Path, path: str) -> Path:
    """Where the host keeps the node's file ``path`` (a path in the node): in the upper
    layer of its shown tree, or in the node's own tree."""
    rel = path.strip("/")
    top, _, rest = rel.partition("/")
    if top in SHOWN_TREES:
        return layer(node_dir, top) / "upper" / rest
    return fs_dir(node_dir) / rel


def trees() -> Iterator[tuple[str, str | None]]:
    """(name, symlink target or None for a directory) of the SHOWN_TREES this host has."""
    for name in SHOWN_TREES:
        host = Path("/") / name
        if host.is_symlink():
            yield name, os.readlink(host)
        elif host.is_dir():
            yield name, None


def read_only_shown() -> list[str]:
    """The SHOWN_READ_ONLY paths this host has."""
    return [rel for rel in SHOWN_READ_ONLY if Path("/", rel).is_dir()]


def sandbox_paths(run_dir: Path) -> list[Path]:
    """What of the sandbox no node may read even in a shown tree: its state dir (the
    run dir's parent) and the checkout it runs from (where its package is not installed
    into a site-packages)."""
    found = [run_dir.resolve().parent]
    package = Path(__file__).resolve().parent
    if (package.parent / "pyproject.toml").is_file():
        found.append(package.parent.parent)
    return found


def shown(path: Path) -> bool:
    """Whether the host's ``path`` would show in a node (it lies in a shown tree)."""
    rel = str(path.resolve()).strip("/")
    return any(rel == t or rel.startswith(t + "/")
               for t in (*(name for name, link in trees() if link is None),
                         *read_only_shown()))


def build(node_dir: Path, run_dir: Path, hostname: str, address: str,
          public_keys: list[str]) -> None:
    """First boot: the node's own tree, its accounts (``public_keys`` authorized for each
    login user), sudoers, hostname and hosts."""
    fs = fs_dir(node_dir)
    for rel, mode in OWN_DIRS.items():
        (fs / rel).mkdir(parents=True, exist_ok=True)
        (fs / rel).chmod(mode)
    for rel, target in OWN_LINKS.items():
        if not (fs / rel).is_symlink():  # an AMI's root has them already
            (fs / rel).symlink_to(target)
    for name, link in trees():
        if link is not None:
            if not (fs / name).is_symlink():
                (fs / name).symlink_to(link)
        else:
            (fs / name).mkdir(exist_ok=True)
            for sub in ("upper", "work"):
                (layer(node_dir, name) / sub).mkdir(parents=True, exist_ok=True)
    _accounts(node_dir, public_keys)
    write(stored(node_dir, "/etc/sudoers"), SUDOERS, 0o440)
    opaque(stored(node_dir, "/etc/sudoers.d"))
    write(stored(node_dir, CLOUD_INIT_SUDOERS), "# clusterkit sandbox: as cloud-init's\n"
          + "".join(f"{user} ALL=(ALL) NOPASSWD:ALL\n" for user in LOGIN_USERS), 0o440)
    write(stored(node_dir, "/etc/hostname"), hostname + "\n")
    hosts = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    write(stored(node_dir, "/etc/hosts"), hosts + f"{address}\t{hostname}\n")
    hide(node_dir, run_dir)


def _accounts(node_dir: Path, public_keys: list[str]) -> None:
    """passwd, group, shadow, gshadow: the host's system accounts and the login users,
    each with a home of its own whose ``~/.ssh/authorized_keys`` holds the instance's
    keys (its key pair's and its user data's ``ssh_authorized_keys``), as cloud-init
    writes them for an image's default user: a key taken off that file is gone."""
    passwd = _system_lines(Path("/etc/passwd"))
    group = _system_lines(Path("/etc/group"))
    for offset, user in enumerate(LOGIN_USERS):
        uid = FIRST_UID + offset
        passwd.append(f"{user}:x:{uid}:{uid}:{user} (sandbox):/home/{user}:/bin/bash")
        group.append(f"{user}:x:{uid}:")
        home = fs_dir(node_dir) / "home" / user
        home.mkdir(parents=True, exist_ok=True)
        home.chmod(0o750)
        keys = home / ".ssh" / "authorized_keys"
        write(keys, "".join(k.strip() + "\n" for k in public_keys), 0o600)
        keys.parent.chmod(0o700)
        for path in (home, keys.parent, keys):
            os.chown(path, uid, uid)
    write(stored(node_dir, "/etc/passwd"), "\n".join(passwd) + "\n")
    write(stored(node_dir, "/etc/group"), "\n".join(group) + "\n")
    write(stored(node_dir, "/etc/shadow"), "".join(
        f"{line.split(':', 1)[0]}:*:19000:0:99999:7:::\n" for line in passwd), 0o640)
    write(stored(node_dir, "/etc/gshadow"), "".join(
        f"{line.split(':', 1)[0]}:*::\n" for line in group), 0o640)


def _system_lines(path: Path) -> list[str]:
    """The lines of a passwd or group file for system ids (below FIRST_UID, or 60000 and
    up: nobody), without the login users."""
    keep = []
    for line in path.read_text().splitlines() if path.exists() else []:
        fields = line.split(":")
        if len(fields) < 3 or not fields[2].isdigit() or fields[0] in LOGIN_USERS:
            continue
        if int(fields[2]) < FIRST_UID or int(fields[2]) >= 60000:
            keep.append(line)
    return keep


def hide(node_dir: Path, run_dir: Path) -> None:
    """At every boot: the host's files of HIDDEN_IN_ETC, and the sandbox's own paths that
    lie in a shown tree, hidden in the node's upper layers (what the host gained since
    the last boot too)."""
    for pattern in HIDDEN_IN_ETC:
        for host in Path("/etc").glob(pattern):
            whiteout(stored(node_dir, str(host)))
    for path in sandbox_paths(run_dir):
        top = str(path).strip("/").partition("/")[0]
        if top in SHOWN_TREES and path.is_dir():
            opaque(stored(node_dir, str(path)))


def masks(run_dir: Path, merged: str) -> list[str]:
    """Boot commands hiding the sandbox's own paths that lie in a read-only shown tree
    (an empty read-only tmpfs over each)."""
    lines = []
    for path in sandbox_paths(run_dir):
        rel = str(path).strip("/")
        if any(rel == t or rel.startswith(t + "/") for t in read_only_shown()):
            lines.append(f"mount -t tmpfs -o ro,size=4k,mode=755 ckmask "
                         f"{merged}{shlex.quote(str(path))}")
    return lines


def client_packages_mount(merged: str) -> list[str]:
    """Commands showing the client's Python packages (the sandbox's own interpreter's
    site-packages: MXNet for sandbox jobs) read-only at the same path on the node, where
    no shown tree shows them already."""
    site = sysconfig.get_paths()["purelib"]
    if shown(Path(site)):
        return []
    where = shlex.quote(site)
    return [f"mkdir -p {merged}{where} && mount --bind -o ro {where} {merged}{where}"]


def write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def whiteout(path: Path) -> None:
    """An overlay whiteout at ``path`` of an upper layer: the lower file is gone."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISCHR(path.lstat().st_mode) and path.lstat().st_rdev == 0:
            return
        path.unlink()
    os.mknod(path, stat.S_IFCHR | 0o600, 0)


def opaque(path: Path) -> None:
    """An opaque directory at ``path`` of an upper layer: the lower one's entries are
    gone (what the node put there itself stays)."""
    path.mkdir(parents=True, exist_ok=True)
    os.setxattr(path, "trusted.overlay.opaque", b"y")


def copy_root(source: Path, dest: Path) -> None:
    """Copy a root's fs/ and each layers/<tree>/upper from ``source`` to ``dest``
    (``cp -a``: owners, modes, links, overlay whiteouts and opaque-directory xattrs
    kept), with an empty work dir beside each upper layer."""
    dest.mkdir(parents=True, exist_ok=True)
    if (source / "fs").is_dir():
        subprocess.run(["cp", "-a", str(source / "fs"), str(dest / "fs")], check=True)
    for upper in sorted((source / "layers").glob("*/upper")):
        layer = dest / "layers" / upper.parent.name
        layer.mkdir(parents=True, exist_ok=True)
        subprocess.run(["cp", "-a", str(upper), str(layer / "upper")], check=True)
        (layer / "work").mkdir(exist_ok=True)
