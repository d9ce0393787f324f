"""Node facts: what a node reports about itself, parsed. PURE (no I/O).

A *node fact* (``NodeFact``) is a shell command to run on a node, a pure parser of its
output lines, and a default for "the command failed or printed nothing" (pyinfra's
``FactBase``). They are called node facts so they are never confused with the AWS-side
lookups that cluster/ and plan/ call facts. ``gather_script`` runs any set of them in
one SSH round trip (as root: ``mdadm --detail`` and ``findmnt``'s labels need it) and
``parse_gathered`` turns its output into ``NodeFacts``; a step that reads a fact nobody
gathered raises ``FactNotGathered`` instead of guessing. ``NodeFact`` itself lives in
``nodefact.py``; the EFA facts in ``efa_facts.py``, registered in ``ALL`` here.

Disks are found by id, never by kernel name (an EBS root can be ``nvme1n1`` while the
instance store is ``nvme2n1``): ``nvme-Amazon_EC2_NVMe_Instance_Storage_*`` is instance
store, ``nvme-Amazon_Elastic_Block_Store_*`` is EBS (the root or a dataset volume).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from clusterkit.bootstrap.efa_facts import EFA_FACTS
from clusterkit.bootstrap.nodefact import FactNotGathered as FactNotGathered  # raised by get
from clusterkit.bootstrap.nodefact import NodeFact, NodeFacts
from clusterkit.node import paths

T = TypeVar("T")

STORE_PREFIX = "nvme-Amazon_EC2_NVMe_Instance_Storage_"
EBS_PREFIX = "nvme-Amazon_Elastic_Block_Store_"
RECEIPTS_DIR = paths.RECEIPTS_DIR
ENVS_DIR = paths.ENVS_DIR
ENV_MARKER = ".clusterkit-packages"  # in a venv: the package-list hash, written last
HOSTS_BEGIN = "# BEGIN clusterkit"
HOSTS_END = "# END clusterkit"


# -- block devices (lsblk) ---------------------------------------------------------------

@dataclass(frozen=True)
class BlockDevice:
    name: str  # kernel name: nvme1n1, md127, vg.01-lv_ephemeral
    type: str  # disk, part, raid0, lvm, loop, dm, ...
    size: str  # as lsblk prints it ("279.4G", or bytes with -b)
    mountpoints: tuple[str, ...] = ()
    fstype: str | None = None
    label: str | None = None
    children: tuple[BlockDevice, ...] = ()

    @property
    def in_use(self) -> bool:
        """Holds something: a filesystem, a mount, partitions or a RAID/LVM on top."""
        return bool(self.children or self.mountpoints or self.fstype)

    def walk(self) -> Iterable[BlockDevice]:
        yield self
        for child in self.children:
            yield from child.walk()


def _json_device(obj: Mapping[str, Any]) -> BlockDevice:
    points = obj.get("mountpoints")
    if points is None:
        points = [obj.get("mountpoint")]
    return BlockDevice(
        name=str(obj.get("kname") or obj.get("name") or ""), type=str(obj.get("type") or ""),
        size=str(obj.get("size") or ""), mountpoints=tuple(p for p in points if p),
        fstype=obj.get("fstype") or None, label=obj.get("label") or None,
        children=tuple(_json_device(c) for c in obj.get("children") or ()))


_TREE = re.compile(r"^([\s│├└─`|\-]*)(\S+)\s+(\d+:\d+)\s+(\d+)\s+(\S+)\s+(\d+)\s+(\S+)\s*(.*)$")


def _text_devices(lines: list[str]) -> tuple[BlockDevice, ...]:
    """Plain ``lsblk`` (header optional, ``├─``/`` `-`` trees, MOUNTPOINT(S) last). A
    comment an author appended (``# <---``) is not part of the mount point."""
    rows: list[tuple[int, dict[str, Any]]] = []
    for line in lines:
        m = _TREE.match(line.rstrip())
        if not m:
            continue  # header, blank
        prefix, name, _majmin, _rm, size, _ro, dtype, rest = m.groups()
        mount = rest.split("#", 1)[0].strip()
        rows.append((len(prefix), {"name": name, "type": dtype, "size": size,
                                   "mountpoints": (mount,) if mount else (), "children": []}))
    roots: list[dict[str, Any]] = []
    stack: list[tuple[int, dict[str, Any]]] = []
    for depth, row in rows:
        while stack and stack[-1][0] >= depth:
            stack.pop()
        (stack[-1][1]["children"] if stack else roots).append(row)
        stack.append((depth, row))

    def build(row: dict[str, Any]) -> BlockDevice:
        return BlockDevice(row["name"], row["type"], row["size"], row["mountpoints"],
                           children=tuple(build(c) for c in row["children"]))
    return tuple(build(r) for r in roots)


def parse_lsblk(lines: list[str]) -> tuple[BlockDevice, ...]:
    """``lsblk -J`` (util-linux 2.27+, ``mountpoint`` or ``mountpoints``) or plain lsblk."""
    text = "\n".join(lines).strip()
    if text.startswith("{"):
        return tuple(_json_device(d) for d in json.loads(text).get("blockdevices") or ())
    return _text_devices(lines)


# -- /dev/disk/by-id -----------------------------------------------------------------------

@dataclass(frozen=True)
class DiskId:
    """One entry of /dev/disk/by-id: a udev link (``target`` = ``../../nvme1n1``) or, in
    the sandbox, a block device node (``target`` None)."""

    name: str
    target: str | None = None

    @property
    def kernel_name(self) -> str | None:
        return self.target.rsplit("/", 1)[-1] if self.target else None

    @property
    def path(self) -> str:
        return f"/dev/disk/by-id/{self.name}"

    @property
    def alias(self) -> bool:
        """A second name for a device listed already: a partition or a namespace link."""
        return bool(re.search(r"-part\d+$|-ns-\d+$", self.name))

    @property
    def instance_store(self) -> bool:
        return self.name.startswith(STORE_PREFIX) and not self.alias

    @property
    def ebs(self) -> bool:
        return self.name.startswith(EBS_PREFIX) and not self.alias


_LS = re.compile(r"^([lbc-])\S*\s+\d+\s+\S+\s+\S+\s+(?:\d+,\s*\d+|\d+)\s+"
                 r"(?:\d{4}-\d\d-\d\d\s+\S+|\S+\s+\S+\s+\S+)\s+(.+)$")


def parse_by_id(lines: list[str]) -> tuple[DiskId, ...]:
    """``ls -l`` / ``ls -la`` of /dev/disk/by-id (``.``, ``..`` and ``total`` skipped)."""
    out = []
    for line in lines:
        m = _LS.match(line.strip())
        if not m or m.group(2) in (".", ".."):
            continue
        kind, rest = m.groups()
        name, _, target = rest.partition(" -> ") if kind == "l" else (rest, "", "")
        if kind in "lb":
            out.append(DiskId(name.strip(), target.strip() or None))
    return tuple(out)


def instance_store_disks(by_id: Sequence[DiskId]) -> tuple[DiskId, ...]:
    """The instance-store NVMe disks, one per device, sorted by id; never EBS."""
    seen: dict[str, DiskId] = {}
    for disk in sorted(by_id, key=lambda d: d.name):
        if disk.instance_store:
            seen.setdefault(disk.kernel_name or disk.name, disk)
    return tuple(seen.values())


# -- mounts (findmnt -J, or `mount`) -------------------------------------------------------

@dataclass(frozen=True)
class Mount:
    """One mounted file system, as findmnt (or `mount`) lists it."""

    target: str
    source: str
    fstype: str
    options: tuple[str, ...] = ()
    label: str | None = None


def _findmnt(objs: Iterable[Mapping[str, Any]]) -> Iterable[Mount]:
    for obj in objs:
        yield Mount(str(obj.get("target") or ""), str(obj.get("source") or ""),
                    str(obj.get("fstype") or ""),
                    tuple(o for o in str(obj.get("options") or "").split(",") if o),
                    obj.get("label") or None)
        yield from _findmnt(obj.get("children") or ())


_MOUNT_LINE = re.compile(r"^(\S+) on (.+?) type (\S+) \(([^)]*)\)$")


def parse_mounts(lines: list[str]) -> tuple[Mount, ...]:
    """``findmnt -J`` (a tree: children flattened) or ``mount`` lines."""
    text = "\n".join(lines).strip()
    if text.startswith("{"):
        return tuple(_findmnt(json.loads(text).get("filesystems") or ()))
    out = []
    for line in lines:
        m = _MOUNT_LINE.match(line.strip())
        if m:
            out.append(Mount(m.group(2), m.group(1), m.group(3),
                             tuple(o for o in m.group(4).split(",") if o)))
    return tuple(out)


def mount_at(mounts: Sequence[Mount], target: str) -> Mount | None:
    """The mount on ``target`` (the last one: it hides the ones below)."""
    hits = [m for m in mounts if m.target == target.rstrip("/") or m.target == target]
    return hits[-1] if hits else None


# -- md RAID (mdadm --detail, /proc/mdstat) ------------------------------------------------

@dataclass(frozen=True)
class MdArray:
    device: str  # /dev/md127, /dev/md/containerraid
    level: str  # raid0
    state: str  # clean, active, inactive, ...
    members: tuple[str, ...]  # kernel names: nvme1n1p1, nvme2n1
    name: str | None = None  # mdadm's array name ("any:containerraid", "0")


def parse_mdadm_detail(lines: list[str]) -> tuple[MdArray, ...]:
    """One or more ``mdadm --detail DEVICE`` outputs, each starting ``DEVICE:``."""
    arrays: list[MdArray] = []
    fields: dict[str, str] = {}
    members: list[str] = []
    device: str | None = None

    def close() -> None:
        if device is not None:
            arrays.append(MdArray(device, fields.get("raid level", ""),
                                  fields.get("state", ""), tuple(members), fields.get("name")))

    for raw in lines:
        line = raw.rstrip()
        if re.match(r"^/dev/\S+:$", line):
            close()
            device, fields, members = line[:-1], {}, []
        elif " : " in line:
            key, _, value = line.partition(" : ")
            fields[key.strip().lower()] = value.strip()
        elif re.match(r"^\s*(\d+|-)\s+\d+\s+\d+\s+(\d+|-)\s+.*\s/dev/\S+$", line):
            members.append(line.split()[-1].rsplit("/", 1)[-1])
    close()
    return tuple(arrays)


@dataclass(frozen=True)
class MdStat:
    name: str  # md127
    active: bool
    level: str | None  # raid0 (None when inactive)
    members: tuple[str, ...]  # kernel names, in role order


def parse_mdstat(lines: list[str]) -> tuple[MdStat, ...]:
    out = []
    for line in lines:
        m = re.match(r"^(md\S+)\s*:\s*(active|inactive)\s+(.*)$", line.strip())
        if not m:
            continue
        name, state, rest = m.groups()
        words = [w for w in rest.split() if not w.startswith("(")]  # (auto-read-only)
        level = words[0] if words and state == "active" and "[" not in words[0] else None
        devs = sorted((w for w in words if "[" in w),
                      key=lambda w: int(re.sub(r"\D", "", w.split("[", 1)[1]) or 0))
        out.append(MdStat(name, state == "active", level,
                          tuple(d.split("[", 1)[0] for d in devs)))
    return tuple(out)


# -- /etc/hosts ----------------------------------------------------------------------------

@dataclass(frozen=True)
class HostsFile:
    entries: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (address, names), in file order
    managed: tuple[str, ...] | None = None  # lines inside clusterkit's block; None = no block

    def names(self) -> list[str]:
        return [n for _, names in self.entries for n in names]


def parse_hosts(lines: list[str]) -> HostsFile:
    entries, managed, inside = [], None, False
    for raw in lines:
        line = raw.strip()
        if line.startswith(HOSTS_BEGIN):
            inside, managed = True, []
            continue
        if line.startswith(HOSTS_END):
            inside = False
            continue
        if inside and managed is not None and line:
            managed.append(" ".join(line.split()))
        words = line.split("#", 1)[0].split()
        if len(words) >= 2:
            entries.append((words[0], tuple(words[1:])))
    return HostsFile(tuple(entries), tuple(managed) if managed is not None else None)


# -- the Python environment ----------------------------------------------------------------

@dataclass(frozen=True)
class Venv:
    path: str
    packages_hash: str | None  # the marker written after a complete install; None = partial
    python: bool  # bin/python is there


@dataclass(frozen=True)
class PythonEnv:
    current: str | None = None  # where ENVS_DIR/current points
    venvs: tuple[Venv, ...] = ()

    def complete(self, packages_hash: str) -> Venv | None:
        return next((v for v in self.venvs if v.packages_hash == packages_hash and v.python),
                    None)


# Plain shell, no interpreter: starting python3 cost ~85% of a node's whole fact gathering
# (a no-op `up` on 16 sandbox nodes sharing two cores). Env names and markers are hashes;
# anything else is left out (a name) or taken as no marker, so the JSON needs no escaping.
_PYENV_SCRIPT = f"""\
base={ENVS_DIR}; sep=; printf '{{"envs": ['
for d in "$base"/*/; do
  d=${{d%/}}; n=${{d##*/}}
  case $n in current|\\*|*[!A-Za-z0-9._-]*) continue;; esac
  h=; [ -f "$d/{ENV_MARKER}" ] && read -r h < "$d/{ENV_MARKER}"
  case $h in ''|*[!A-Za-z0-9._-]*) h=null;; *) h="\\"$h\\"";; esac
  py=false; [ -e "$d/bin/python" ] && py=true
  printf '%s{{"path": "%s", "hash": %s, "python": %s}}' "$sep" "$d" "$h" "$py"; sep=', '
done
cur=null; [ -L "$base/current" ] && cur="\\"$(readlink -f "$base/current")\\""
printf '], "current": %s}}\\n' "$cur"
"""


def parse_python_env(lines: list[str]) -> PythonEnv:
    data = json.loads("\n".join(lines))
    return PythonEnv(data.get("current"), tuple(
        Venv(e["path"], e.get("hash"), bool(e.get("python"))) for e in data.get("envs") or ()))


# -- small ones: hostname, boot id, receipts -----------------------------------------------

def _first_line(lines: list[str]) -> str | None:
    return next((line.strip() for line in lines if line.strip()), None)


def parse_receipts(lines: list[str]) -> dict[str, str]:
    """``STEP DIGEST`` lines -> {step: digest}."""
    out = {}
    for line in lines:
        step, _, digest = line.strip().partition(" ")
        if step and digest.strip():
            out[step] = digest.strip()
    return out


HOSTNAME = NodeFact("hostname", "hostname", _first_line, None)
BOOT_ID = NodeFact("boot_id", "cat /proc/sys/kernel/random/boot_id", _first_line, None)
BLOCK_DEVICES = NodeFact("block_devices", "lsblk -J -o NAME,KNAME,TYPE,SIZE,FSTYPE,LABEL,"
                         "MOUNTPOINT", parse_lsblk, ())
DISKS_BY_ID = NodeFact("disks_by_id", "LC_ALL=C ls -l /dev/disk/by-id/", parse_by_id, ())
MOUNTS = NodeFact("mounts", "findmnt -J -o TARGET,SOURCE,FSTYPE,OPTIONS,LABEL",
                  parse_mounts, ())
MD_DETAIL = NodeFact("md_detail", 'for d in /dev/md[0-9]*; do [ -b "$d" ] && '
                     'mdadm --detail "$d"; done', parse_mdadm_detail, ())
MDSTAT = NodeFact("mdstat", "cat /proc/mdstat", parse_mdstat, ())
HOSTS_FILE = NodeFact("hosts_file", "cat /etc/hosts", parse_hosts, HostsFile())
PYTHON_ENV = NodeFact("python_env", _PYENV_SCRIPT,
                      parse_python_env, PythonEnv())
def parse_efs_utils(lines: list[str]) -> str | None:
    """The path of amazon-efs-utils' mount helper (``mount.efs``): TLS mounts of EFS
    need it. None: not installed."""
    found = _first_line(lines)
    return found if found and found.startswith("/") and found.endswith("/mount.efs") else None


EFS_UTILS = NodeFact("efs_utils", "for p in /sbin/mount.efs /usr/sbin/mount.efs "
                     "/usr/local/sbin/mount.efs; do [ -x \"$p\" ] && echo \"$p\"; done; true",
                     parse_efs_utils, None)
RECEIPTS = NodeFact("receipts", f'for f in {RECEIPTS_DIR}/*; do ck_line=; [ -f "$f" ] && '
                    '{ read -r ck_line < "$f" || true; '
                    'printf \'%s %s\\n\' "${f##*/}" "$ck_line"; }; done; true',
                    parse_receipts, {})

ALL: tuple[NodeFact[Any], ...] = (HOSTNAME, BOOT_ID, BLOCK_DEVICES, DISKS_BY_ID, MOUNTS,
                                  MD_DETAIL, MDSTAT, HOSTS_FILE, PYTHON_ENV, EFS_UTILS,
                                  RECEIPTS, *EFA_FACTS)
BY_NAME: dict[str, NodeFact[Any]] = {f.name: f for f in ALL}


def from_outputs(outputs: Mapping[str, Sequence[str] | None]) -> NodeFacts:
    """Parse raw outputs by fact name (None = the command failed: the default)."""
    return NodeFacts({name: BY_NAME[name].parse(lines) for name, lines in outputs.items()})


BEGIN, END = "@@clusterkit-fact-begin", "@@clusterkit-fact-end"


def gather_script(facts: Sequence[NodeFact[Any]] = ALL) -> str:
    """One POSIX-shell script printing every fact between markers with its exit code."""
    parts = []
    for fact in facts:
        parts.append(f"printf '%s\\n' '{BEGIN} {fact.name}'\n"
                     f"( {fact.command} ) 2>/dev/null\n"
                     f"printf '\\n%s %s %d\\n' '{END}' '{fact.name}' \"$?\"\n")
    return "".join(parts)


def parse_gathered(lines: Sequence[str],
                   facts: Sequence[NodeFact[Any]] = ALL) -> NodeFacts:
    """``gather_script``'s output -> NodeFacts; a fact whose section is missing, or whose
    command exited non-zero, gets its default."""
    outputs: dict[str, list[str] | None] = {f.name: None for f in facts}
    for name, code, body in sections(lines, BEGIN, END):
        if name in outputs:
            outputs[name] = body if code == 0 else None
    return from_outputs(outputs)


def sections(lines: Sequence[str], begin: str, end: str,
             ) -> Iterator[tuple[str, int, list[str]]]:
    """(name, exit code, body lines) of each ``begin NAME`` ... ``end NAME CODE`` section
    that finished; a section cut off (no end line, or another name) is left out."""
    current: str | None = None
    body: list[str] = []
    for line in lines:
        if line.startswith(begin + " "):
            current, body = line.split()[1], []
        elif line.startswith(end + " ") and current is not None:
            words = line.split()
            if len(words) == 3 and words[1] == current and words[2].lstrip("-").isdigit():
                yield current, int(words[2]), body
            current = None
        elif current is not None:
            body.append(line)
