"""One emulated node: a real OpenSSH server on its own loopback address.

As root, each node runs in its own UTS + mount namespace with a private,
persistent root file system (an overlay of the host's ``/``; the upper layer
lives in the node dir, so writes survive stop/start like a root EBS volume and
vanish on terminate). Inside it the node has its own hostname, ``/etc`` (hosts,
passwd), ``/root`` and ``/home``, ``/dev/disk/by-id`` (EBS / instance-store
devices by id) and shims: ``mount.nfs4`` and ``mount.efs`` (EFS = a directory shared
by the nodes; ``mount.efs`` stands for amazon-efs-utils, refuses a mount without
``tls``, as the file system policy clusterkit sets does, and notes each mount's
options in ``EFS_MOUNTS``) and, without an md driver, ``mdadm`` (says "not emulated").

Login users: ``root`` and ``ubuntu`` / ``ec2-user`` (uid 0 in the node, home
``/root``, ``/home/<user>`` links there), all authorized with the instance's
EC2 key pair.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shlex
import signal
import socket
import subprocess
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
LOGIN_USERS = ("ubuntu", "ec2-user")
EFS_IN_NODE = "/var/lib/clusterkit-sandbox/efs"
MARKER_ENV = "CLUSTERKIT_SANDBOX_RUN"  # set on each node's sshd, so a sweep finds them
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SSHD_CONFIG = """\
ListenAddress {address}:22
HostKey /etc/clusterkit-node/ssh_host_ed25519_key
AuthorizedKeysFile /etc/clusterkit-node/authorized_keys .ssh/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
AllowAgentForwarding yes
AllowTcpForwarding yes
PidFile none
PrintMotd no
MaxStartups 200:30:400
MaxSessions 100
AcceptEnv LANG LC_*
Subsystem sftp internal-sftp
LogLevel ERROR
"""

MOUNT_NFS_SHIM = """\
#!/bin/sh
# clusterkit sandbox: EFS is a directory shared by the cluster's nodes.
# mount -t nfs4 fs-XXXX.efs.REGION.amazonaws.com:/[sub] DIR [-o opts]
set -eu
spec="$1"; dir="$2"
fsid="${spec%%:*}"; fsid="${fsid%%.*}"; sub="${spec#*:}"
case "$fsid" in fs-*) ;; *) echo "mount.nfs4: only EFS (fs-...) is emulated" >&2; exit 32;; esac
mkdir -p "@EFS@/$fsid$sub"
exec mount --bind "@EFS@/$fsid$sub" "$dir"
""".replace("@EFS@", EFS_IN_NODE)

EFS_MOUNTS = "/var/lib/clusterkit-sandbox/efs-mounts"  # mount.efs: "SPEC DIR OPTIONS" lines
CONF_IN_NODE = "/etc/clusterkit-node"  # the node's conf/ directory, read-only to it
# in conf/: the ARN of the node's instance profile while it has one (the agent keeps it),
# as IMDS has its role's credentials: `mount.efs -o iam` needs them
ROLE_FILE = "instance-role"
# amazon-efs-utils' helper: mount -t efs fs-XXXX.efs.REGION.amazonaws.com:/ DIR -o tls,iam
MOUNT_EFS_SHIM = """\
#!/bin/sh
set -eu
spec="$1"; dir="$2"; opts=""; shift 2
while [ $# -gt 0 ]; do [ "$1" = -o ] && opts="${2:-}"; shift; done
case ",$opts," in
  *,tls,*) ;;
  *) echo "mount.efs: access denied: the file system policy requires TLS (-o tls)" >&2
     exit 32;;
esac
case ",$opts," in
  *,iam,*) [ -s "@ROLE@" ] || { echo "mount.efs: could not retrieve AWS credentials:" \
      "the instance has no IAM role (no instance profile associated)" >&2; exit 1; };;
esac
echo "$spec $dir $opts" >> "@LOG@"
exec /usr/sbin/mount.nfs4 "$spec" "$dir"
""".replace("@LOG@", EFS_MOUNTS).replace("@ROLE@", f"{CONF_IN_NODE}/{ROLE_FILE}")

POWER_IN_NODE = "/var/lib/clusterkit-sandbox/power"  # the sandbox's run/power, in every node
INSTANCE_ID_FILE = "instance-id"  # in conf/: the node's own instance id
# The OS's power-off (shutdown -h now, poweroff, halt): a request the agent reads on its
# tick, which stops or terminates the instance as its InstanceInitiatedShutdownBehavior
# says, as EC2 does. Never the host's: these shims shadow them in the node's own root.
POWER_SHIM = """\
#!/bin/sh
# clusterkit sandbox: this node's power-off; the sandbox agent ends the instance.
set -eu
me=$(basename "$0")
if [ "$me" = shutdown ]; then
  when=
  for a in "$@"; do
    case "$a" in
      -h|-P|-H|--poweroff|--halt|--no-wall) ;;
      now|+0) when=now;;
      *) echo "shutdown $*: not emulated (clusterkit sandbox: shutdown -h now only)" >&2
         exit 1;;
    esac
  done
  [ -n "$when" ] || { echo "shutdown: not emulated without 'now' (clusterkit sandbox)" >&2
                      exit 1; }
fi
iid=$(cat "@CONF@/@IID@")
printf '%s\\n' "$me${*:+ $*}" > "@POWER@/$iid.tmp"
mv "@POWER@/$iid.tmp" "@POWER@/$iid"
echo "$me: the system is going down now (clusterkit sandbox, instance $iid)"
""".replace("@CONF@", CONF_IN_NODE).replace("@IID@", INSTANCE_ID_FILE).replace(
    "@POWER@", POWER_IN_NODE)
POWER_COMMANDS = ("shutdown", "poweroff", "halt")

MDADM_SHIM = """\
#!/bin/sh
echo "mdadm: not emulated: this kernel has no md driver (clusterkit sandbox)" >&2
exit 3
"""


@dataclass
class NodeSpec:
    instance_id: str
    address: str
    hostname: str
    public_keys: list[str]
    root: Path  # the node's directory under run/nodes
    efs_dir: Path
    namespaces: bool = True
    md: bool = False
    extra_hosts: list[str] = field(default_factory=list)


def node_env(run_dir: Path | None = None) -> dict[str, str]:
    """The whole environment of every process started for a node. Nothing of the daemon's
    (the user's ``AWS_*`` credentials, ``SSH_AUTH_SOCK``, ...) is passed on, so nothing of
    it can be read from a node's ``/proc/PID/environ``. ``run_dir`` sets the sweep marker."""
    env = {"PATH": NODE_PATH, "LANG": "C.UTF-8", "HOME": "/root"}
    if run_dir is not None:
        env[MARKER_ENV] = str(run_dir)
    return env


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.parent.name,
                    "-f", str(path)], check=True, stdin=subprocess.DEVNULL, env=node_env())


def prepare(spec: NodeSpec) -> str:
    """First boot: host key, sshd config, authorized keys, the node's /etc. Returns
    the public host key line. Later boots keep what is there (like a root volume)."""
    conf = spec.root / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    key = conf / "ssh_host_ed25519_key"
    if not key.exists():
        _keygen(key)
        (conf / "authorized_keys").write_text("".join(k.strip() + "\n" for k in spec.public_keys))
        _first_boot_root(spec)
    (conf / "sshd_config").write_text(SSHD_CONFIG.format(address=spec.address))
    (conf / INSTANCE_ID_FILE).write_text(spec.instance_id + "\n")
    for sub in ("disk/by-id", "upper", "work", "merged"):
        (spec.root / sub).mkdir(parents=True, exist_ok=True)
    return key.with_suffix(".pub").read_text().strip()


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def _first_boot_root(spec: NodeSpec) -> None:
    """Seed the overlay's upper layer: what differs from the host on this node."""
    upper = spec.root / "upper"
    for private in ("root", "tmp", "home"):  # start empty, like a fresh image
        (upper / private).mkdir(parents=True, exist_ok=True)
        _opaque(upper / private)
    (upper / "root").chmod(0o700)
    (upper / "tmp").chmod(0o1777)
    passwd = Path("/etc/passwd").read_text()
    for user in LOGIN_USERS:
        if f"\n{user}:" not in "\n" + passwd:
            passwd += f"{user}:x:0:0:{user} (sandbox, uid 0):/root:/bin/bash\n"
        # one home for every uid-0 login, so the shell's ~ and ssh's ~ agree
        (upper / "home" / user).symlink_to("/root")
    _write(upper / "etc/passwd", passwd)
    _write(upper / "etc/hostname", spec.hostname + "\n")
    hosts = Path("/etc/hosts").read_text() if Path("/etc/hosts").exists() else ""
    _write(upper / "etc/hosts", hosts + f"{spec.address}\t{spec.hostname}\n")
    _write(upper / "usr/sbin/mount.nfs4", MOUNT_NFS_SHIM, 0o755)
    _write(upper / "usr/sbin/mount.efs", MOUNT_EFS_SHIM, 0o755)
    if not spec.md:
        _write(upper / "usr/sbin/mdadm", MDADM_SHIM, 0o755)
    for command in POWER_COMMANDS:
        for where in power_shim_dirs():
            _write(upper / where / command, POWER_SHIM, 0o755)


VIEW_IN_NODE = "/var/lib/clusterkit-sandbox/view"  # the sandbox's run/view, read-only


def view_dir(run_dir: Path) -> Path:
    """What every node may read of the sandbox (its address map: the master's recovery
    controller dials the nodes through it), shown read-only at VIEW_IN_NODE."""
    return run_dir / "view"


def power_dir(run_dir: Path) -> Path:
    """The sandbox's directory of power-off requests (``<instance id>`` files), shown in
    every node at POWER_IN_NODE."""
    return run_dir / "power"


def power_shim_dirs() -> list[str]:
    """Where a node finds shutdown / poweroff / halt: /usr/sbin, and /sbin where the
    host's is not a link to it (an overlay directory there would hide the link)."""
    dirs = ["usr/sbin"]
    if Path("/sbin").is_dir() and not Path("/sbin").is_symlink():
        dirs.append("sbin")
    return dirs


def _opaque(path: Path) -> None:
    """Hide the host's files below ``path`` in the node (overlay opaque dir)."""
    # not root / no xattrs: the node sees the host's files there
    with contextlib.suppress(OSError):
        os.setxattr(path, "trusted.overlay.opaque", b"y")


PRIVATE_DIRS = ("/root", "/tmp", "/home")  # empty on a node (``_first_boot_root``)


def client_packages_mount(merged: str) -> list[str]:
    """Commands showing the client's Python packages (the sandbox's own interpreter's
    site-packages: MXNet for sandbox jobs) read-only at the same path on the node, when
    they lie under a directory the nodes get empty (a checkout under /tmp or /root);
    elsewhere the nodes see them through the overlay already."""
    site = sysconfig.get_paths()["purelib"]
    if not site.startswith(tuple(d + "/" for d in PRIVATE_DIRS)):
        return []
    where = shlex.quote(site)
    return [f"mkdir -p {merged}{where} && mount --bind -o ro {where} {merged}{where}"]


def boot_script(spec: NodeSpec) -> str:
    r = shlex.quote(str(spec.root))
    merged = f"{r}/merged"
    power = shlex.quote(str(power_dir(spec.efs_dir.parent)))
    view = shlex.quote(str(view_dir(spec.efs_dir.parent)))
    lines = [
        "set -e",
        f"mount -t overlay ckroot -o lowerdir=/,upperdir={r}/upper,workdir={r}/work {merged}",
        f"for m in /proc /sys; do mount --rbind $m {merged}$m; done",
        # the node's own /dev: a copy of the host's, plus its disks by id
        f"mount -t tmpfs -o mode=755,size=64m ckdev {merged}/dev",
        f"(cd /dev && cp -a $(ls -A | grep -vxE 'pts|shm|disk') {merged}/dev/) || true",
        f"for m in /dev/pts /dev/shm; do mkdir -p {merged}$m; mount --rbind $m {merged}$m; done",
        f"mkdir -p {merged}/dev/disk && mount --bind {r}/disk {merged}/dev/disk",
        f"mkdir -p {merged}/etc/clusterkit-node {merged}/run/sshd {merged}{EFS_IN_NODE}",
        f"mount --bind {r}/conf {merged}/etc/clusterkit-node",
        f"mount --bind {shlex.quote(str(spec.efs_dir))} {merged}{EFS_IN_NODE}",
        f"mkdir -p {merged}{POWER_IN_NODE}",
        f"mount --bind {power} {merged}{POWER_IN_NODE}",
        f"mkdir -p {merged}{VIEW_IN_NODE}",
        f"mount --bind -o ro {view} {merged}{VIEW_IN_NODE}",
        *client_packages_mount(merged),
        f"hostname {shlex.quote(spec.hostname)}",
        f"exec chroot {merged} {' '.join(sshd_flags())} -f /etc/clusterkit-node/sshd_config",
    ]
    return "\n".join(lines) + "\n"


@functools.lru_cache(maxsize=1)
def sshd_flags() -> tuple[str, ...]:
    """sshd in the foreground, logging to stderr, and without re-executing itself for
    every connection (``-r``) where this sshd still has that option: the re-exec buys
    a fresh address-space layout per connection, and costs each connection ~7 ms of
    CPU that dozens of sandbox nodes share with the client on a few cores. A real
    node's sshd keeps it."""
    probe = subprocess.run([SSHD, "-r", "-t", "-f", os.devnull], capture_output=True,
                           text=True, stdin=subprocess.DEVNULL, check=False)
    no_reexec = "unknown option" not in probe.stderr and "illegal option" not in probe.stderr
    return (SSHD, "-D", "-e", *(("-r",) if no_reexec else ()))


def start(spec: NodeSpec, log: Path) -> subprocess.Popen:
    """Boot the node's sshd in the background."""
    with open(log, "ab") as out:
        if spec.namespaces:
            script = spec.root / "boot.sh"
            script.write_text(boot_script(spec))
            argv = ["unshare", "--uts", "--mount", "--propagation", "private",
                    "sh", str(script)]
        else:
            argv = [*sshd_flags(), "-f", str(spec.root / "conf" / "sshd_config")]
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True,
                                env=node_env(spec.root.parent.parent))
    return proc


def wait_listening(address: str, timeout: float = 5.0, port: int = 22) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            if sock.connect_ex((address, port)) == 0:
                return True
        time.sleep(0.02)
    return False


def mount_ns(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


def pids_in_ns(ns: str) -> list[int]:
    """Every process whose mount namespace is ``ns`` (all of a node's processes,
    including training jobs detached from their SSH session)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and mount_ns(int(entry)) == ns:
            found.append(int(entry))
    return found


def kill_all(pids: list[int], grace: float = 1.0) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.02)
        pids = [p for p in pids if _alive(p)]
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def stop(pid: int | None, ns: str | None) -> None:
    """Stop the node: its sshd and every process living in its namespace."""
    victims = set(pids_in_ns(ns)) if ns and ns != mount_ns(os.getpid()) else set()
    if pid:
        victims.add(pid)
    kill_all(sorted(victims))
    if pid:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
