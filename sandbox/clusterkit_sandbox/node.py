"""One emulated node: a real OpenSSH server on its own loopback address.

As root, each node runs in its own UTS, mount and PID namespaces (``start``): its own
hostname; its own root file system (``noderoot``: its own top-level tree, of this machine
only the OS trees ``/usr`` and ``/etc`` as overlays and a few read-only paths, kept over
stop/start like a root EBS volume and gone on terminate); its own ``/proc``, mounted for
its PID namespace, so a node sees only its own processes, its sshd is its PID 1 and
``/proc/1/root`` is its own ``/``; its own ``/run``, ``/dev/shm`` and ``/dev/pts``
instance; and its own ``/dev`` (a copy of the host's, plus its disks by id,
``/dev/disk/by-id``: EBS / instance-store devices). How the sandbox finds and signals a
node's processes from here: ``nodeprocs``. Shims: ``mount.nfs4`` and ``mount.efs`` (EFS =
a directory shared by the nodes; ``mount.efs`` stands for amazon-efs-utils, refuses a
mount without ``tls``, as the file system policy clusterkit sets does, and notes each
mount's options in ``EFS_MOUNTS``), shutdown / poweroff / halt (``POWER_SHIM``), iptables
(``netfilter``: the nat OUTPUT owner rules, kept for the sandbox's metadata) and, without
an md driver, ``mdadm`` (says "not emulated").

Login users: ``ubuntu`` and ``ec2-user``, non-root with passwordless ``sudo``, authorized
with the instance's EC2 key pair; root cannot log in (``noderoot``).

No user namespace: one would make a node's root powerless outside it, but then a node
cannot mount its disks. ext4 and xfs are not mountable in a user namespace (the kernel
lets only file systems marked FS_USERNS_MOUNT, such as tmpfs and overlay, be mounted
with capabilities of a user namespace other than the initial one; mount(2) answers
EPERM), and the product mounts its disks on the node as root: the dataset volume
(deploy-dataset, ``playbooks/dataset.sh``) and the instance-store scratch
(``playbooks/scratch.sh``), as ``tests/integration/test_sandbox_nodes.py`` does too. So
a node's root, which ``sudo`` makes of its login users, is this machine's root: the
namespaces and the file system allow-list keep a node's processes from seeing this
machine's processes and files; they are no wall against a user who runs ``sudo`` on a
node (docs/operations/security-sandbox-nodes.md).
"""

from __future__ import annotations

import functools
import os
import shlex
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from clusterkit_sandbox import netfilter, noderoot
from clusterkit_sandbox.nodeprocs import kill_all as kill_all
from clusterkit_sandbox.nodeprocs import mount_ns as mount_ns
from clusterkit_sandbox.nodeprocs import pid_ns as pid_ns
from clusterkit_sandbox.nodeprocs import pids_in_ns as pids_in_ns
from clusterkit_sandbox.nodeprocs import stop as stop
from clusterkit_sandbox.noderoot import LOGIN_USERS as LOGIN_USERS
from clusterkit_sandbox.noderoot import client_packages_mount as client_packages_mount

SSHD = "/usr/sbin/sshd"
EFS_IN_NODE = "/var/lib/clusterkit-sandbox/efs"
MARKER_ENV = "CLUSTERKIT_SANDBOX_RUN"  # set on each node's sshd, so a sweep finds them
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

SSHD_CONFIG = """\
ListenAddress {address}:22
HostKey /etc/clusterkit-node/ssh_host_ed25519_key
AuthorizedKeysFile .ssh/authorized_keys
PermitRootLogin no
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

SHARED_IN_NODE = "/var/lib/clusterkit-sandbox/shared"  # the sandbox's run/shared, read-write
# pip's index on a node: the sandbox's (pypi.Index, the shared directory's wheels/ served
# by the endpoint): a node reaches no network
PIP_CONF = """\
[global]
index-url = {index}
"""

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
    image: Path | None = None  # the root its AMI carries (images.copy_root), if any
    package_index: str = ""  # the sandbox's package index (pypi.Index), if it serves one


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
    """Every boot: host key, sshd config, authorized keys, the node's root file system
    (built at first boot, ``noderoot``; what it hides refreshed every boot). Returns the
    public host key line. Later boots keep what is there (like a root volume)."""
    conf = spec.root / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    key = conf / "ssh_host_ed25519_key"
    run_dir = spec.efs_dir.parent
    if not key.exists():
        if spec.image is not None and spec.image.is_dir() and not (spec.root / "fs").exists():
            noderoot.copy_root(spec.image, spec.root)  # the AMI's root volume
        _keygen(key)
        _first_boot_root(spec)
    elif spec.namespaces:
        noderoot.hide(spec.root, run_dir)
    (conf / "sshd_config").write_text(SSHD_CONFIG.format(address=spec.address))
    (conf / INSTANCE_ID_FILE).write_text(spec.instance_id + "\n")
    for sub in ("disk/by-id", "merged"):
        (spec.root / sub).mkdir(parents=True, exist_ok=True)
    return key.with_suffix(".pub").read_text().strip()


def _first_boot_root(spec: NodeSpec) -> None:
    """The node's root file system (``noderoot.build``) and the sandbox's shims in it."""
    if spec.namespaces:
        noderoot.build(spec.root, spec.efs_dir.parent, spec.hostname, spec.address,
                       spec.public_keys)
    shims = {"/usr/sbin/mount.nfs4": MOUNT_NFS_SHIM, "/usr/sbin/mount.efs": MOUNT_EFS_SHIM}
    if not spec.md:
        shims["/usr/sbin/mdadm"] = MDADM_SHIM
    for where in power_shim_dirs():
        shims.update({f"/{where}/{command}": POWER_SHIM for command in POWER_COMMANDS})
        shims[f"/{where}/iptables"] = netfilter.IPTABLES_SHIM  # never the host's
    for path, text in shims.items():
        noderoot.write(noderoot.stored(spec.root, path), text, 0o755)
    if spec.package_index:
        noderoot.write(noderoot.stored(spec.root, "/etc/pip.conf"),
                       PIP_CONF.format(index=spec.package_index))


VIEW_IN_NODE = "/var/lib/clusterkit-sandbox/view"  # the sandbox's run/view, read-only


def view_dir(run_dir: Path) -> Path:
    """What every node may read of the sandbox (its address map: the master's recovery
    controller dials the nodes through it), shown read-only at VIEW_IN_NODE."""
    return run_dir / "view"




def shared_dir(run_dir: Path) -> Path:
    """The one directory every node of this sandbox shares with the sandbox's user
    (read-write, at SHARED_IN_NODE, like a LAN share): demos and tests hand the nodes
    files and markers through it. Nothing else of the host's is writable in a node."""
    return run_dir / "shared"


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


def _root_mounts(spec: NodeSpec, merged: str) -> list[str]:
    """The node's / at ``merged``: its own tree, the host's shown trees as overlays with
    the node's upper layers, the read-only ones, a /proc of its PID namespace, /sys, a
    fresh /run."""
    r = shlex.quote(str(spec.root))
    lines = [f"mount --bind {shlex.quote(str(noderoot.fs_dir(spec.root)))} {merged}"]
    for name, link in noderoot.trees():
        if link is None:
            up = f"{r}/layers/{name}"
            lines.append(f"mount -t overlay ck{name} -o lowerdir=/{name},upperdir={up}/upper,"
                         f"workdir={up}/work {merged}/{name}")
    for rel in noderoot.read_only_shown():
        lines.append(f"mkdir -p {merged}/{rel} && mount --bind -o ro /{rel} {merged}/{rel}")
    return [*lines, *noderoot.masks(spec.efs_dir.parent, merged),
            f"mount -t proc -o nosuid,nodev,noexec ckproc {merged}/proc",
            f"mount --rbind /sys {merged}/sys",
            f"mount -t tmpfs -o mode=755,nosuid,nodev ckrun {merged}/run",
            f"mkdir -p {merged}/run/sshd {merged}/run/lock"]


def _dev_mounts(spec: NodeSpec, merged: str) -> list[str]:
    """The node's own /dev: a copy of the host's, its own devpts instance and /dev/shm,
    its disks by id."""
    r = shlex.quote(str(spec.root))
    return [
        f"mount -t tmpfs -o mode=755,size=64m ckdev {merged}/dev",
        f"(cd /dev && cp -a $(ls -A | grep -vxE 'pts|shm|disk|ptmx') {merged}/dev/) || true",
        f"mkdir -p {merged}/dev/pts {merged}/dev/shm {merged}/dev/disk",
        f"mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 ckpts {merged}/dev/pts",
        f"ln -s pts/ptmx {merged}/dev/ptmx",
        f"mount -t tmpfs -o mode=1777,nosuid,nodev ckshm {merged}/dev/shm",
        f"mount --bind {r}/disk {merged}/dev/disk",
    ]


def boot_script(spec: NodeSpec) -> str:
    """What the node's init runs (``start``: in its own namespaces) before it becomes
    the node's sshd."""
    merged = f"{shlex.quote(str(spec.root))}/merged"
    run_dir = spec.efs_dir.parent
    power = shlex.quote(str(power_dir(run_dir)))
    view = shlex.quote(str(view_dir(run_dir)))
    shared = shlex.quote(str(shared_dir(run_dir)))
    lines = [
        "set -e",
        *_root_mounts(spec, merged),
        *_dev_mounts(spec, merged),
        f"mkdir -p {merged}{CONF_IN_NODE} {merged}{EFS_IN_NODE}",
        f"mount --bind -o ro {shlex.quote(str(spec.root / 'conf'))} {merged}{CONF_IN_NODE}",
        f"mount --bind {shlex.quote(str(spec.efs_dir))} {merged}{EFS_IN_NODE}",
        f"mkdir -p {merged}{POWER_IN_NODE}",
        f"mount --bind {power} {merged}{POWER_IN_NODE}",
        f"mkdir -p {merged}{VIEW_IN_NODE}",
        f"mount --bind -o ro {view} {merged}{VIEW_IN_NODE}",
        f"mkdir -p {shared} {merged}{SHARED_IN_NODE} && chmod 1777 {shared}",
        f"mount --bind {shared} {merged}{SHARED_IN_NODE}",
        *client_packages_mount(merged),
        f"hostname {shlex.quote(spec.hostname)}",
        f"exec chroot {merged} {' '.join(sshd_flags())} -f {CONF_IN_NODE}/sshd_config",
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


# the node's namespaces; with --pid --fork, unshare's child is the node's init (PID 1),
# killed with unshare (--kill-child): nodeprocs
UNSHARE = ("unshare", "--uts", "--mount", "--pid", "--fork", "--kill-child",
           "--propagation", "private")


def start(spec: NodeSpec, log: Path) -> subprocess.Popen:
    """Boot the node's sshd in the background."""
    with open(log, "ab") as out:
        if spec.namespaces:
            script = spec.root / "boot.sh"
            script.write_text(boot_script(spec))
            argv = [*UNSHARE, "sh", str(script)]
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
