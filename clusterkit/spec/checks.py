"""Meaning checks the key tables cannot express: cross-key rules and instance facts.
PURE: the catalog is data shipped with the package, no AWS call.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath

import clusterkit.spec.model as model
from clusterkit.catalog import families, instances, prices, regions
from clusterkit.errors import SpecIssue
from clusterkit.kinds import MarketPolicy
from clusterkit.node.autostop_policy import range_problem
from clusterkit.spec.model import Spec
from clusterkit.spec.reserved import check_reservation

Add = Callable[..., None]
MIXED_HINT = ("list GPU types only, or types without GPUs only: the list is the set of types "
              "that may be used, ranked by $ per GPU-hour (without GPUs: per vCPU-hour), not "
              "an order of preference")
_SYSTEM_DIRS = {"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt",
                "/proc", "/root", "/run", "/sbin", "/sys", "/tmp", "/usr", "/var"}
# Wider than this, allowed_cidr is more than one site: a warning (IPv6 /48 is one site).
_WIDEST_PREFIX = {4: 16, 6: 48}
_VOLUME_IOPS = {"gp3": (3000, 80000), "io1": (100, 64000), "io2": (100, 256000)}
_RESERVED_ENV = ("DMLC_", "PS_", "CLUSTERKIT_", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE",
                 "RANK", "LOCAL_RANK", "NODE_RANK")
# Reserved names the user may still set (training.topology keeps them): the interface
# ps-lite binds, and ps-lite's own tuning and debug knobs, which clusterkit never sets.
_USER_ENV = frozenset({"DMLC_INTERFACE", "PS_VERBOSE", "PS_HEARTBEAT_INTERVAL",
                       "PS_HEARTBEAT_TIMEOUT", "PS_RESEND", "PS_RESEND_TIMEOUT"})
# pip package name -> the CUDA version it is built for (digits after cu/cuda).
_CUDA_PACKAGE = re.compile(r"^(mxnet-cu|cupy-cuda|nvidia-[a-z0-9-]+-cu|jax-cuda|jaxlib-cuda)"
                           r"(\d+)", re.IGNORECASE)
_GPU_PACKAGE = re.compile(r"^(paddlepaddle-gpu|tensorflow-gpu|onnxruntime-gpu)\b", re.I)
# Newest compute capability each CUDA release compiles for; (major, minor) -> cc.
_CUDA_MAX_CC = [((9, 0), (7, 0)), ((10, 0), (7, 5)), ((11, 0), (8, 0)), ((11, 1), (8, 6)),
                ((11, 8), (9, 0)), ((12, 8), (12, 0))]
_CUDA_MIN_CC = [((11, 0), (3, 5)), ((12, 0), (5, 0)), ((13, 0), (7, 5))]


def check_spec(spec: Spec) -> list[SpecIssue]:
    issues: list[SpecIssue] = []

    def add(path: str, message: str, hint: str | None = None, level: str = "error") -> None:
        loc = spec.where(path)
        issues.append(SpecIssue(loc.file, loc.line, loc.col, path, message, hint, level))

    for check in (_regions, _nodes, _ssh, _mounts, _dataset, _efs, _train, _instance_facts,
                  _mixed_types, _max_price, _autostop, _network, check_reservation):
        check(spec, add)
    return issues


def _regions(spec: Spec, add: Add) -> None:
    """A region AWS does not have (us-east-9) is an error: every call would go to a host
    that does not exist."""
    named = [("region", spec.region)] + [("regions", r) for r in spec.regions[1:]]
    for path, region in named:
        if not regions.is_known(region):
            add(path, f"{region!r} is not an AWS region", regions.suggestion(region))


def _nodes(spec: Spec, add: Add) -> None:
    nodes = spec.nodes
    if nodes.count > model.SANE_NODE_LIMIT and not nodes.allow_large:
        add("nodes.count", f"{nodes.count} nodes is more than {model.SANE_NODE_LIMIT}",
            "if you really mean it, add `allow_large: true` under nodes")
    if nodes.market == MarketPolicy.ON_DEMAND and nodes.max_price is not None:
        add("nodes.max_price", "max_price is ignored for the on-demand market",
            "remove max_price, or use market: spot", "warning")
    if nodes.master.market is not None and nodes.master.market == nodes.market:
        add("nodes.master.market", f"every node is {nodes.market} already (nodes.market): "
            "the master is not set apart", "remove nodes.master, or set nodes.market to "
            "spot with the master on-demand", "warning")


def _ssh(spec: Spec, add: Add) -> None:
    cidr = spec.ssh.allowed_cidr
    if cidr is None:
        return
    try:
        net = ipaddress.ip_network(cidr, strict=True)
    except ValueError as exc:
        try:
            hint = f"did you mean {ipaddress.ip_network(cidr, strict=False)}?"
        except ValueError:
            hint = "write a network address with its prefix, e.g. 203.0.113.7/32"
        add("ssh.allowed_cidr", f"{cidr!r} is not a valid CIDR block ({exc})", hint)
        return
    widest = _WIDEST_PREFIX[net.version]
    if net.prefixlen == 0:
        add("ssh.allowed_cidr", f"{cidr} opens SSH to the whole internet",
            "leave allowed_cidr unset to allow only your own address", "warning")
    elif net.prefixlen < widest:
        add("ssh.allowed_cidr", f"{cidr} opens SSH to {net.num_addresses:,} addresses "
            f"(wider than /{widest})", "narrow it to your office or VPN range, or leave it "
            "unset to allow only your own address", "warning")


def _mounts(spec: Spec, add: Add) -> None:
    st = spec.storage
    mounts = [(f"storage.{name}.mount", part.mount)
              for name, part in (("scratch", st.scratch), ("efs", st.efs), ("dataset", st.dataset))
              if part is not None]
    for path, mount in mounts:
        if posixpath.normpath(mount) != mount or "//" in mount:
            add(path, f"{mount!r} is not a normalized path",
                f"write {posixpath.normpath(mount)!r}")
        elif mount in _SYSTEM_DIRS:
            add(path, f"{mount} is a system directory", "mount under a new path such as /data")
    for i, (path_a, a) in enumerate(mounts):
        for path_b, b in mounts[i + 1:]:
            if a == b or b.startswith(a.rstrip("/") + "/") or a.startswith(b.rstrip("/") + "/"):
                add(path_b, f"mount path {b} conflicts with {path_a} ({a})",
                    "give each storage part its own, non-nested mount path")


def _dataset(spec: Spec, add: Add) -> None:
    ds = spec.storage.dataset
    if ds is None:
        return
    vt = ds.volume_type
    if ds.iops is not None and vt not in _VOLUME_IOPS:
        add("storage.dataset.iops", f"{vt} volumes have no provisioned IOPS",
            "remove iops, or use volume_type gp3, io1 or io2")
    elif ds.iops is not None:
        low, high = _VOLUME_IOPS[vt]
        if not low <= ds.iops <= high:
            add("storage.dataset.iops", f"{ds.iops} IOPS is outside {low}..{high} for {vt}",
                f"choose {low}..{high}")
    elif vt in ("io1", "io2"):
        add("storage.dataset.volume_type", f"{vt} volumes need iops",
            "add `iops:` under storage.dataset, e.g. iops: 16000")
    if ds.throughput is not None:
        if vt != "gp3":
            add("storage.dataset.throughput", f"throughput can only be set on gp3, not {vt}",
                "remove throughput, or use volume_type gp3")
        elif ds.throughput > (ds.iops or 3000) / 4:
            add("storage.dataset.throughput", f"{ds.throughput} MiB/s needs at least "
                f"{ds.throughput * 4} IOPS on gp3 (0.25 MiB/s per IOPS)",
                f"set iops >= {ds.throughput * 4} or lower throughput")
    if ds.initialization_rate is not None and ds.snapshot is None:
        add("storage.dataset.initialization_rate", "initialization_rate applies only to a "
            "volume made from a snapshot", "set storage.dataset.snapshot or remove it",
            "warning")


def _efs(spec: Spec, add: Add) -> None:
    efs = spec.storage.efs
    if efs and efs.file_system_id and efs.deletion_policy == "delete" \
            and "storage.efs.deletion_policy" in spec.locations:
        add("storage.efs.deletion_policy", "clusterkit never deletes a file system it did not "
            "create; deletion_policy is ignored for an existing file_system_id",
            "remove deletion_policy", "warning")


def _train(spec: Spec, add: Add) -> None:
    train = spec.train
    if train is None:
        return
    _workdir(train.workdir, add)
    if train.framework == "mxnet" and train.servers_per_node == 0:
        add("train.servers_per_node", "an MXNet parameter-server job needs at least one "
            "server", "set servers_per_node: 1 (one per node is what the tutorial uses)")
    if train.framework == "torchrun" and "train.servers_per_node" in spec.locations:
        add("train.servers_per_node", "torchrun has no parameter servers; ignored",
            "remove servers_per_node", "warning")
    if train.throughput_pattern is not None:
        _throughput_pattern(train.throughput_pattern, add)
    if train.elastic is not None:
        _elastic(spec, add)
    for name in train.env:
        if name in _USER_ENV:
            continue
        if name.startswith(_RESERVED_ENV[:3]) or name in _RESERVED_ENV[3:]:
            add(f"train.env.{name}", f"{name} is set by clusterkit for every process",
                "remove it; clusterkit computes the job's topology", "warning")


def _elastic(spec: Spec, add: Add) -> None:
    """An elastic job is torchrun's, on more nodes than its minimum."""
    train = spec.train
    assert train is not None and train.elastic is not None
    if train.framework != "torchrun":
        add("train.elastic", f"an elastic job needs framework: torchrun, not "
            f"{train.framework} (MXNet's dist_sync parameter server cannot change its "
            "worker count: a lost node stops the job and train.max_recoveries restarts it)",
            "remove train.elastic, or use framework: torchrun")
    elif train.elastic.min >= spec.nodes.count:
        add("train.elastic.min", f"min {train.elastic.min} leaves no room to go on "
            f"smaller: the cluster has {spec.nodes.count} node(s)",
            f"set min below nodes.count ({spec.nodes.count}), or remove train.elastic")


def _throughput_pattern(pattern: str, add: Add) -> None:
    """A regex the nodes' samplers compile: exactly one group, the number."""
    try:
        groups = re.compile(pattern).groups
    except re.error as exc:
        add("train.throughput_pattern", f"not a regular expression: {exc}",
            r"e.g. 'throughput=([0-9.]+)': one group around the number")
        return
    if groups != 1:
        add("train.throughput_pattern", f"has {groups} groups; it needs exactly one, "
            "around the samples/s number", r"e.g. 'throughput=([0-9.]+)'")


def _workdir(path: str, add: Add) -> None:
    """A relative workdir is a local directory clusterkit uploads: from a shared spec it
    must not reach beyond the spec's own directory (``--workdir`` is the user's choice).
    The text only (``..``): the links on the way are followed where the directory is
    read, before anything is uploaded (``cluster/jobs/workdir.py``)."""
    if path.startswith(("/", "~")):
        return
    if ".." in PurePosixPath(path).parts:
        add("train.workdir", f"relative workdir {path!r} leaves the spec's directory",
            "a relative workdir is uploaded from the spec file's directory and must stay "
            "inside it; to upload another directory, give it as `--workdir DIR`")


def _instance_facts(spec: Spec, add: Add) -> None:
    scratch = spec.storage.scratch
    for i, name in enumerate(spec.nodes.instance_types):
        path = f"nodes.instance_types[{i}]"
        itype = instances.lookup(name)
        if itype is None:
            _unknown_type(name, path, add)
            continue
        if scratch is not None and scratch.raid0 and itype.instance_store is None:
            add(path, f"{name} has no instance-store disks for the RAID-0 scratch at "
                f"{scratch.mount}", "choose a type with NVMe instance store (e.g. p4d, g5, "
                "i3) or set storage.scratch.raid0: false")
        _gpu_facts(spec, itype, path, add)


def mixed_types(gpu: Sequence[str], cpu: Sequence[str]) -> str | None:
    """What is said of an instance_types list with GPU types (``gpu``) and types
    without GPUs (``cpu``): the latter are never used. None for a list of one kind."""
    if not (gpu and cpu):
        return None
    return (f"mixes GPU types ({', '.join(gpu)}) and types without GPUs ({', '.join(cpu)}): "
            "the types without GPUs are never used")


def _mixed_types(spec: Spec, add: Add) -> None:
    """A warning for a list that mixes GPU and CPU types (types the catalog does not
    know are left out: whether they have GPUs is not known)."""
    known = {n: t for n in spec.nodes.instance_types if (t := instances.lookup(n))}
    message = mixed_types([n for n, t in known.items() if t.gpu],
                          [n for n, t in known.items() if not t.gpu])
    if message:
        add("nodes.instance_types", message, MIXED_HINT, "warning")


def _unknown_type(name: str, path: str, add: Add) -> None:
    """A size the catalog's complete family lacks is an error (AWS does not offer it);
    any other type the catalog lacks is a warning (AWS may have added it)."""
    offered = families.not_offered(name)
    if offered:
        add(path, f"{name} is not an instance type AWS offers: the {name.partition('.')[0]} "
            f"family comes in {', '.join(families.COMPLETE_FAMILIES[name.partition('.')[0]])}",
            f"did you mean {' or '.join(offered)}?")
        return
    close = families.close_matches(name, 1)
    add(path, f"{name} is not in clusterkit's instance catalog; GPU and disk checks "
        "are skipped for it", f"did you mean {close[0]}?" if close else
        "check the spelling (AWS adds types the catalog may not know yet)", "warning")


def _gpu_facts(spec: Spec, itype: instances.InstanceType, type_path: str, add: Add) -> None:
    train = spec.train
    if train is None:
        return
    if itype.gpu is None and train.workers_per_node == 0:
        add("train.workers_per_node", f"0 means one worker per GPU, but {itype.name} has no "
            "GPU", "set workers_per_node: 1 or more")
    for j, pkg in enumerate(train.packages):
        path = f"train.packages[{j}]"
        cuda = _cuda_version(pkg)
        if itype.gpu is None and (cuda or _GPU_PACKAGE.match(pkg)):
            add(path, f"{pkg} is a GPU (CUDA) build but {itype.name} ({type_path}) has no GPU",
                "use the CPU package (e.g. mxnet) or a GPU instance type")
        elif itype.gpu is not None and cuda and cuda[1] is not None:
            _cuda_arch(pkg, cuda, itype, path, add)


def _cuda_version(pkg: str) -> tuple[int, int | None] | None:
    m = _CUDA_PACKAGE.match(pkg)
    if not m:
        return None
    digits = m.group(2)
    if len(digits) == 2 and digits[0] == "1":  # cu11, cuda12x: a whole major version
        return int(digits), None
    if len(digits) >= 2:  # cu112 -> 11.2, cu90 -> 9.0
        major_len = 1 if digits[0] != "1" else 2
        return int(digits[:major_len]), int(digits[major_len:] or 0)
    return int(digits), None


def _cc(text: str) -> tuple[int, int]:
    major, _, minor = text.partition(".")
    return int(major), int(minor or 0)


def _cuda_arch(pkg: str, cuda: tuple[int, int | None], itype: instances.InstanceType,
               path: str, add: Add) -> None:
    gpu = itype.gpu
    assert gpu is not None
    version = (cuda[0], cuda[1] or 0)
    newest = max((cc for v, cc in _CUDA_MAX_CC if v <= version), default=(6, 2))
    oldest = max((cc for v, cc in _CUDA_MIN_CC if v <= version), default=(3, 0))
    have = _cc(gpu.compute_capability)
    label = f"CUDA {version[0]}.{version[1]}"
    sm = f"sm_{have[0]}{have[1]}"
    if have > newest and version[0] < 13:
        add(path, f"{pkg} is built for {label}, which predates the {gpu.arch.title()} GPUs "
            f"({gpu.model}, {sm}) of {itype.name}", "use a build for a newer CUDA (11.8 or "
            "later for Ada/Hopper), or an instance type with an older GPU", "warning")
    elif have < oldest:
        add(path, f"{label} ({pkg}) no longer supports the {gpu.arch.title()} GPUs "
            f"({gpu.model}, {sm}) of {itype.name}", "use a build for an older CUDA",
            "warning")


def _max_price(spec: Spec, add: Add) -> None:
    nodes = spec.nodes
    if nodes.max_price is None or nodes.market == MarketPolicy.ON_DEMAND:
        return
    above = []
    for name in nodes.instance_types:
        price = prices.on_demand_price(name, spec.region)
        if price is not None and nodes.max_price > price:
            above.append(f"{name} ${price:.4g}/h")
    if above:
        add("nodes.max_price", f"max_price ${nodes.max_price}/h is above the on-demand price "
            f"in {spec.region} of {', '.join(above)}",
            "leave max_price unset to cap spot at the on-demand price", "warning")


def cuda_warnings(spec: Spec, instance_type: str) -> list[str]:
    """What validate says about train.packages on ``instance_type``'s GPU (a CUDA build
    too old or too new for it, a GPU build on a type without GPU), as lines: `plan` and
    `up` show them beside the chosen type, `train` before it launches. [] for a type the
    catalog does not know."""
    itype = instances.lookup(instance_type)
    if itype is None or spec.train is None:
        return []
    lines: list[str] = []

    def add(path: str, message: str, hint: str | None = None, level: str = "error") -> None:
        lines.append(f"{path}: {message}" + (f"; {hint}" if hint else ""))

    _gpu_facts(spec, itype, f"the chosen type {instance_type}", add)
    return lines


def _autostop(spec: Spec, add: Add) -> None:
    """The idle time in range; `stop` where EC2 cannot stop the nodes (one-time spot
    instances only terminate): an error on a spot-only market, a warning where spot comes
    first."""
    auto = spec.autostop
    if auto is None or auto.idle_s is None:
        return
    problem = range_problem(auto.idle_s)
    if problem:
        add("autostop.idle" if "autostop.idle" in spec.locations else "autostop", problem,
            "e.g. 20s, 30m or 2h")
    if auto.action != "stop":
        return
    if spec.nodes.market == MarketPolicy.SPOT:
        add("autostop.action", "spot nodes cannot stop: EC2 terminates a one-time spot "
            "instance that shuts down", "use action: terminate, or nodes.market: on-demand")
    elif spec.nodes.market == MarketPolicy.SPOT_THEN_ON_DEMAND:
        add("autostop.action", "spot nodes terminate when they shut down (only on-demand "
            "nodes can stop)", "nodes.market: on-demand if every node must stop",
            level="warning")



def _network(spec: Spec, add: Add) -> None:
    """``network.efa: true`` on a type without EFA is an error naming EFA-capable
    alternatives; EFA without a placement group works, at a latency it is bought for."""
    if spec.network.efa != "true":
        return
    for i, name in enumerate(spec.nodes.instance_types):
        itype = instances.lookup(name)
        if itype is not None and itype.efa_interfaces == 0:
            others = instances.efa_alternatives(itype)
            add(f"nodes.instance_types[{i}]", f"{name} has no EFA, and network.efa is true",
                (f"EFA-capable instead: {', '.join(others)}; " if others else "")
                + "or set network.efa: auto (EFA where the type has it)")
    if not spec.nodes.placement_group:
        add("nodes.placement_group", "EFA without a cluster placement group: the nodes may "
            "land far apart in the AZ", "set nodes.placement_group: true", "warning")
