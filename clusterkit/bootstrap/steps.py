"""Bootstrap steps: node facts + spec + cluster view -> the commands still needed, or why
nothing is. PURE (reads the playbook texts it is given; no I/O of its own).

Every step is one function ``(NodeFacts, Spec, ClusterView, index) -> Want`` and
``plan_step`` turns a ``Want`` into a ``StepPlan``: ``run`` (commands, the last of which
writes the receipt), ``done`` or ``skip``, each with a reason in words. A step's digest
is the sha256 of its playbooks' text and its commands' arguments and stdin; device steps
(scratch, efs) add the node's boot id, since a reboot wipes what they made. Those and
the dataset step are done only when the receipt matches AND the live system shows the
result; the efa step by the live system alone (its file holds the text, or not). A step
that cannot be done as the spec asks (``network.efa: true`` without EFA software) plans
``fail``: the node stops there. Steps run in the order of ``STEPS``; ``plan_node`` plans
them all for one node.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from clusterkit.bootstrap import efa
from clusterkit.bootstrap import efa_facts as ef
from clusterkit.bootstrap import facts as nf

# the inputs and outputs of a step (re-exported: callers import them from here)
from clusterkit.bootstrap.stepdata import (
    ClusterView,
    Command,
    DatasetView,
    NodeView,
    StepAction,
    StepPlan,
    Verify,
    Want,
    host_names,
)
from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.plan.nodes import node_name
from clusterkit.spec.model import Spec

# package data: a link to the repository's playbooks/ (a copy in a wheel)
PLAYBOOKS_DIR = Path(__file__).resolve().parents[1] / "resources" / "playbooks"
WORKERS_FILE = "/etc/clusterkit/hosts"  # one in-cluster IP per line, master first
PROFILE_FILE = "/etc/profile.d/clusterkit.sh"
KNOWN_HOSTS_FILE = "/etc/clusterkit/known_hosts"
SCRATCH_LABEL = "ck-scratch"  # the filesystem label scratch.sh gives what it makes
MD_NAME = "clusterkit-scratch"  # scratch.sh's md array: /dev/md/clusterkit-scratch
# AWS's recommended NFS options for EFS, plus: a missing network or file system must not
# block boot (the fstab line is there so a reboot mounts it again)
EFS_OPTIONS = ("nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,"
               "noresvport,_netdev,nofail")
# amazon-efs-utils' mount.efs: TLS through its stunnel, IAM authorization with the
# instance role (the file system policy the stack sets requires both)
EFS_TLS_OPTIONS = "tls,iam,noresvport,_netdev,nofail"
TLS_SOURCE = "127.0.0.1:/"  # how a TLS mount shows: NFS to the local stunnel
WHEEL_CACHE = ".clusterkit/wheels"  # under the EFS mount


def read_playbooks(directory: Path = PLAYBOOKS_DIR) -> dict[str, str]:
    """{name: text} of every playbook (what run.py hands to the steps)."""
    return {p.name: p.read_text() for p in sorted(directory.glob("*.sh"))}


__all__ = ["ClusterView", "Command", "DatasetView", "NodeView", "STEPS", "STEP_NAMES",
           "StepAction", "StepPlan", "Verify", "Want", "host_names", "plan_node",
           "plan_step", "read_playbooks"]


# -- the steps -------------------------------------------------------------------------------

def want_hostname(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    name = node_name(cluster.name, index)
    current = facts.get(nf.HOSTNAME)
    return Want((Command("hostname.sh", (name,)),), live=current == name,
                not_live=f"the hostname is {current or 'unknown'}, not {name}")


def hosts_block(cluster: ClusterView) -> str:
    return "".join(f"{n.address} {' '.join(host_names(cluster.name, n.index))}\n"
                   for n in cluster.nodes)


def want_hosts(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    args = ["--rank", str(index), "--gpus", str(cluster.gpus_per_node)]
    if spec.storage.efs is not None:
        args += ["--efs-mount", spec.storage.efs.mount]
    block = hosts_block(cluster)
    hosts = facts.get(nf.HOSTS_FILE)
    names = hosts.names()
    twice = sorted({n for n in names if names.count(n) > 1})
    live = hosts.managed == tuple(block.splitlines()) and not twice
    return Want((Command("hosts.sh", tuple(args), block),), live=live,
                not_live="/etc/hosts " + (f"names {', '.join(twice)} more than once" if twice
                                          else "lacks the current clusterkit block"))


def known_hosts_lines(cluster: ClusterView, port: int) -> str:
    lines = []
    for node in cluster.nodes:
        names = [*host_names(cluster.name, node.index), node.address]
        if port != 22:
            names = [f"[{n}]:{port}" for n in names]
        lines.append(f"{','.join(names)} {node.host_key}\n")
    return "".join(lines)


def want_ssh(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    missing = [n.index for n in cluster.nodes if not n.host_key]
    if missing:
        return Want(skip="no pinned host key for node(s) "
                    f"{', '.join(map(str, missing))}; `up` records it at first contact")
    return Want((Command("ssh.sh", ("--user", spec.ssh.user, "--port", str(spec.ssh.port)),
                         known_hosts_lines(cluster, spec.ssh.port)),))


def _foreign(device: nf.BlockDevice, our_md: set[str]) -> list[str]:
    """What on an instance-store disk is not clusterkit's scratch (empty: blank or ours):
    clusterkit's filesystem label, its md array, or a member of that array are ours."""
    found: list[str] = []

    def visit(d: nf.BlockDevice) -> None:
        if d.name in our_md or d.label == SCRATCH_LABEL:
            return
        member = d.fstype == "linux_raid_member" and (d.label or "").endswith(MD_NAME)
        if d is not device or d.mountpoints or (d.fstype and not member):
            found.append(f"{d.name} ({d.type}{', ' + d.fstype if d.fstype else ''}"
                         f"{' on ' + ','.join(d.mountpoints) if d.mountpoints else ''})")
        for child in d.children:
            visit(child)
    visit(device)
    return found


def want_scratch(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    scratch = spec.storage.scratch
    if scratch is None:
        return Want(skip="storage.scratch is not set")
    disks = nf.instance_store_disks(facts.get(nf.DISKS_BY_ID))
    if not disks:
        return Want(skip="no instance-store NVMe disks (no /dev/disk/by-id/"
                    f"{nf.STORE_PREFIX}*)")
    if not scratch.raid0:
        disks = disks[:1]
    mount = nf.mount_at(facts.get(nf.MOUNTS), scratch.mount)
    if mount is not None and mount.label != SCRATCH_LABEL:
        return Want(skip=f"{scratch.mount} already holds {mount.source} ({mount.fstype}), "
                    "not clusterkit's scratch; clusterkit leaves it alone")
    kernel = {d.kernel_name for d in disks if d.kernel_name}
    stats = facts.get(nf.MDSTAT)
    arrays = facts.get(nf.MD_DETAIL) if len(disks) > 1 else ()
    our_md = {s.name for s in stats if len(disks) > 1 and set(s.members) == kernel}
    busy = [f"{d.name}: {'; '.join(held)}" for d in facts.get(nf.BLOCK_DEVICES)
            if d.name in kernel and (held := _foreign(d, our_md))]
    if busy:
        return Want(skip="the instance-store disks are in use, clusterkit leaves them alone: "
                    + " | ".join(busy))
    args = ("--mount", scratch.mount, "--owner", spec.ssh.user, *(d.path for d in disks))
    live, not_live = mount is not None, f"{scratch.mount} is not mounted"
    if mount is not None and "noatime" not in mount.options:
        live, not_live = False, f"{scratch.mount} is mounted without noatime"
    elif live and len(disks) > 1 and kernel and not any(
            a.level == "raid0" and set(a.members) == kernel and a.device.rsplit("/", 1)[-1]
            in our_md and not re.search(r"fail|inactive|degraded", a.state, re.I)
            for a in arrays):
        live, not_live = False, "no healthy RAID-0 over the instance-store disks"
    return Want((Command("scratch.sh", args),), live=live, boot_keyed=True,
                not_live=not_live + " (disks wiped by a stop/start, or a reboot)")


EFS_PLAIN_WARNING = ("storage.efs.tls is false: EFS is mounted as plain NFS, unencrypted "
                     "in transit")
EFS_CREATED_NEEDS_TLS = (
    "storage.efs.tls is false, but the file system clusterkit creates refuses clients "
    "without TLS (its policy denies them): remove `tls: false`, or name a file system of "
    "your own in storage.efs.file_system_id")


def _efs_not_live(mount: nf.Mount | None, efs_mount: str, dns: str) -> str:
    if mount is None:
        return f"{efs_mount} is not mounted"
    if mount.source.startswith(f"{dns}:"):
        return f"{efs_mount} is mounted without TLS"
    return f"{efs_mount} holds {mount.source}, not {dns}"


def _efs_how(facts: nf.NodeFacts, tls: bool) -> tuple[str, ...]:
    """efs.sh's mount options: TLS through mount.efs (installed first where the node
    lacks it), or plain NFS only when the spec turns TLS off."""
    if not tls:
        return ("--type", "nfs4", "--options", EFS_OPTIONS)
    install = ("--install-efs-utils",) if facts.get(nf.EFS_UTILS) is None else ()
    return ("--type", "efs", *install, "--options", EFS_TLS_OPTIONS)


def want_efs(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    """EFS mounted with TLS (amazon-efs-utils installed where missing); plain NFS, with a
    warning, only where the spec says ``storage.efs.tls: false``."""
    efs = spec.storage.efs
    if efs is None:
        return Want(skip="storage.efs is not set")
    fs = efs.file_system_id or cluster.efs_id
    if not fs:
        return Want(skip="the EFS file system id is not known yet (the stack has no output)")
    if not efs.tls and efs.create:
        return Want(error=EFS_CREATED_NEEDS_TLS)
    dns = f"{fs}.efs.{cluster.region}.amazonaws.com"
    mount = nf.mount_at(facts.get(nf.MOUNTS), efs.mount)
    nfs = mount is not None and mount.fstype.startswith("nfs")
    live = mount is not None and (not nfs or mount.source == TLS_SOURCE
                                  or (not efs.tls and mount.source.startswith(f"{dns}:")))
    how = _efs_how(facts, efs.tls)
    return Want((Command("efs.sh", ("--owner", spec.ssh.user, *how, dns, efs.mount)),),
                live=live, boot_keyed=True, not_live=_efs_not_live(mount, efs.mount, dns),
                warning="" if efs.tls else EFS_PLAIN_WARNING)


def ebs_by_id(volume_id: str) -> str:
    """The by-id name under which a Nitro node shows an EBS volume."""
    return nf.EBS_PREFIX + volume_id.replace("-", "")


def want_dataset(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    view = cluster.dataset
    if view is None:
        return Want(skip="no dataset deployed (storage.dataset.snapshot or deploy-dataset)")
    volume = view.volumes.get(index)
    if volume is None:
        return Want(skip=f"no dataset volume for node {index} yet")
    args = ["--mount", view.mount, "--volume", volume, "--verify", view.verify.value]
    if view.manifest_sha256:
        args += ["--manifest-sha256", view.manifest_sha256]
    if view.prewarm:
        args.append("--prewarm")
    command = Command("dataset.sh", tuple(args))
    disk = next((d for d in facts.get(nf.DISKS_BY_ID) if d.name == ebs_by_id(volume)), None)
    mount = nf.mount_at(facts.get(nf.MOUNTS), view.mount)
    if disk is None:
        return Want((command,), live=False, not_live=f"{volume} is not visible on the node "
                    f"(/dev/disk/by-id/{ebs_by_id(volume)})")
    if mount is None:
        return Want((command,), live=False, not_live=f"{view.mount} is not mounted")
    ours = {disk.path} | ({f"/dev/{disk.kernel_name}"} if disk.kernel_name else set())
    if mount.source not in ours:
        return Want((command,), live=False,
                    not_live=f"{view.mount} holds {mount.source}, not {volume}")
    return Want((command,), live="ro" in mount.options,
                not_live=f"{view.mount} is mounted read-write")


def packages_hash(packages: Sequence[str]) -> str:
    """The key of a training environment: sha256 of the package list, as written."""
    return hashlib.sha256("".join(f"{p}\n" for p in packages).encode()).hexdigest()[:16]


def want_env(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    train = spec.train
    if train is None or not train.packages:
        return Want(skip="train.packages is empty")
    key = packages_hash(train.packages)
    args = ["--python", train.python, "--hash", key, "--owner", spec.ssh.user]
    if spec.storage.efs is not None:
        args += ["--shared-cache", f"{spec.storage.efs.mount.rstrip('/')}/{WHEEL_CACHE}"]
    env = facts.get(nf.PYTHON_ENV)
    venv = env.complete(key)
    live = venv is not None and env.current is not None and \
        env.current.rsplit("/", 1)[-1] == venv.path.rsplit("/", 1)[-1]
    # a complete current env is enough, receipt or not: its key is the package list's,
    # whatever the arguments (a built image's nodes have it, made without the cache)
    return Want((Command("env.sh", tuple(args), "".join(f"{p}\n" for p in train.packages)),),
                live=live, not_live=f"no complete environment {key} is current",
                live_suffices=True)


def want_efa(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int) -> Want:
    """The libfabric/NCCL settings for EFA (``efa.efa_environment``) in
    ``efa.PROFILE_PATH``, written once; a node without EFA software gets a warning
    (``network.efa: true``: an error) and a profile where EFA no longer applies goes."""
    name = cluster.nodes[index].instance_type
    itype = instance_type(name) if name else None
    profile = facts.get(ef.EFA_PROFILE)
    if itype is None:
        return _no_efa(profile, f"{name} is not in the catalog" if name else
                       "the instance type is not known")
    if itype.efa_interfaces <= 0:
        return _no_efa(profile, f"{itype.name} has no EFA")
    if not spec.network.efa_wanted:
        return _no_efa(profile, "network.efa is false")
    env = efa.efa_environment(ef.efa_facts(facts), itype.name,
                              itype.gpu.arch if itype.gpu else None, itype.efa_interfaces)
    warning = " | ".join(env.warnings)
    if not env.env:  # no EFA software: the one warning names what is missing and the fix
        if spec.network.efa == "true":
            return Want(error=f"network.efa is true: {warning}")
        return replace(_no_efa(profile, "no EFA software on the image"), warning=warning)
    text = efa.profile_text(env.env)
    wanted = ef.ProfileFile(hashlib.sha256(text.encode()).hexdigest(), ef.PROFILE_MODE)
    if profile is None:
        not_live = f"no {efa.PROFILE_PATH}"
    elif profile.sha256 != wanted.sha256:
        not_live = f"{efa.PROFILE_PATH} holds other settings"
    else:
        not_live = f"{efa.PROFILE_PATH} has mode {profile.mode}, not {ef.PROFILE_MODE}"
    return Want((Command("efa.sh", (), text),), live=profile == wanted, not_live=not_live,
                warning=warning, live_decides=True)


def _no_efa(profile: ef.ProfileFile | None, reason: str) -> Want:
    """EFA does not apply: skipped, or the profile an earlier bootstrap wrote removed."""
    if profile is None:
        return Want(skip=reason)
    return Want((Command("efa.sh", ("--remove",)),), live=False, live_decides=True,
                not_live=f"{reason}, but {efa.PROFILE_PATH} is there from an earlier "
                "bootstrap")


StepFn = Callable[[nf.NodeFacts, Spec, ClusterView, int], Want]
# efa right after the cheap configuration steps: a node that `network.efa: true` refuses
# stops there, before disks, EFS, the dataset or a package install take their minutes
STEPS: tuple[tuple[str, StepFn], ...] = (
    ("hostname", want_hostname), ("hosts", want_hosts), ("ssh", want_ssh),
    ("efa", want_efa), ("scratch", want_scratch), ("efs", want_efs),
    ("dataset", want_dataset), ("env", want_env))
STEP_NAMES = tuple(name for name, _ in STEPS)


def spec_steps(spec: Spec) -> tuple[str, ...]:
    """The steps the spec calls for, in the order they run (`plan` lists them): the
    others skip on every node whatever it holds. Whether one runs on a node is the
    node's to say (its receipts and live state, read when it answers SSH)."""
    storage = spec.storage
    wanted = {"efa": spec.network.efa_wanted, "scratch": storage.scratch is not None,
              "efs": storage.efs is not None,
              "dataset": storage.dataset is not None,
              "env": spec.train is not None and bool(spec.train.packages)}
    return tuple(name for name in STEP_NAMES if wanted.get(name, True))


def digest(commands: Sequence[Command], playbooks: Mapping[str, str],
           boot_id: str | None = None) -> str:
    """sha256 of the playbooks' text and the commands' inputs (and the boot id)."""
    body = [{"playbook": c.playbook, "text": playbooks[c.playbook], "args": list(c.args),
             "stdin": c.stdin} for c in commands]
    text = json.dumps({"commands": body, "boot_id": boot_id}, sort_keys=True)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def plan_step(step: str, want: Want, facts: nf.NodeFacts, playbooks: Mapping[str, str],
              force: bool = False) -> StepPlan:
    if want.error is not None:
        return StepPlan(step, StepAction.FAIL, want.error)
    if want.skip is not None:
        return StepPlan(step, StepAction.SKIP, want.skip, warning=want.warning)
    boot = facts.get(nf.BOOT_ID) if want.boot_keyed else None
    key = digest(want.commands, playbooks, boot)
    commands = (*want.commands, Command("receipt.sh", (step, key)))
    if force:
        return StepPlan(step, "run", "forced (--force-step)", commands, key, want.warning)
    if want.live_decides:
        return (StepPlan(step, "done", "the system shows it", (), key,
                         want.warning) if want.live else
                StepPlan(step, "run", want.not_live, commands, key, want.warning))
    receipt = facts.get(nf.RECEIPTS).get(step)
    if want.live_suffices and want.live and receipt != key:
        return StepPlan(step, "done", "the system shows it (made before this receipt: a "
                        "built image's)", (), key, want.warning)
    if receipt == key and want.live is not False:
        return StepPlan(step, "done", "receipt matches"  # the outcome says "already done"
                        + (", and the system shows it" if want.live else ""), (), key,
                        want.warning)
    if receipt == key:
        reason = f"receipt matches but {want.not_live}"
    elif receipt is None:
        reason = "no receipt"
    else:
        reason = "inputs, playbook" + (" or boot" if want.boot_keyed else "") + \
            " changed since the receipt"
    return StepPlan(step, "run", reason, commands, key, want.warning)


def plan_node(facts: nf.NodeFacts, spec: Spec, cluster: ClusterView, index: int,
              playbooks: Mapping[str, str], force: Sequence[str] = ()) -> tuple[StepPlan, ...]:
    """Every step for node ``index``, in order (``force``: step names to re-run)."""
    unknown = sorted(set(force) - set(STEP_NAMES))
    if unknown:
        raise ValueError(f"no bootstrap step {', '.join(unknown)}; steps: "
                         f"{', '.join(STEP_NAMES)}")
    return tuple(plan_step(name, fn(facts, spec, cluster, index), facts, playbooks,
                           name in force) for name, fn in STEPS)
