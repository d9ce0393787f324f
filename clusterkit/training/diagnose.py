"""What holds a training job back, from the node sampler's metric windows (one sample per
node every ~2 s: ``t``, ``dt``, ``job_cpu`` cores, ``cpu`` %, ``mem``, ``net`` B/s, ``disk``
(the dataset volume), ``samples_per_s``, ``progress_at``, ``gpus``: absent without
nvidia-smi, and then the GPU rules skip the node) and the nodes' health text. Pure: no
I/O, no clock; stdlib only, Python >= 3.8, so it may run on a node."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType

from clusterkit.node.gpuhealth import gpu_health, parse_xids, problems

__all__ = ["Context", "Finding", "Kind", "NodeHealth", "Severity", "cores", "diagnose",
           "gpu_health", "now", "parse_xids"]

# Fewer samples than this per node (6 s at the sampler's 2 s) describe a moment, not a window.
MIN_SAMPLES = 3
# A fed training step keeps the GPUs at 90%+; a mean under 70% means they wait on something.
GPU_UTIL_LOW = 70.0
# p95 - p5 over 60 points: the GPUs alternate between busy and idle, i.e. batches come in bursts.
GPU_UTIL_SWING = 60.0
# Job processes using 85% of the vCPUs: the input pipeline has no idle core left to grow into.
CPU_SATURATED = 0.85
# Under 5% iowait the CPUs are not waiting on the disk: the decode/augment work is the limit.
IOWAIT_QUIET = 5.0
# Over 15% iowait (mean) a sizeable share of CPU time waits on reads: the disk is the limit.
IOWAIT_HIGH = 15.0
# EBS SSDs serve a read in ~1 ms; over 10 ms per op is a throttled or lazily loading volume.
READ_MS_HIGH = 10.0
# Under half of every GPU's memory used: the batch could at least double.
MEM_HEADROOM = 0.5
# Headroom matters only on busy GPUs; on idle ones a larger batch just waits longer.
GPU_UTIL_BUSY = 80.0
# 70% of the catalog bandwidth (mean over the window) is as full as TCP gets in practice.
NET_SATURATED = 0.70
# Under 75% of the others' median samples/s: it holds back every synchronous step.
STRAGGLER_RATIO = 0.75
# 30 points of GPU util below the others' median: more than jitter between equal nodes.
STRAGGLER_UTIL_GAP = 30.0
# A GPU under 5% is idle (nvidia-smi shows a few % for an idle context).
STALL_UTIL = 5.0
# A CPU job under 0.05 cores does nothing: its processes are asleep or blocked.
STALL_CPU = 0.05
# A node with no sample this long is lost (train.node_timeout's default), not stalled.
SAMPLES_LIVE_S = 60.0
# A node's samples/s now (`top`'s column, the findings' figure): the mean over its newest
# this many samples (a throughput line comes every few batches, not every sample).
RATE_RECENT = 5


class Kind(str, Enum):
    UNHEALTHY_GPU = "unhealthy_gpu"
    STALLED = "stalled"
    DATA_STARVED = "data_starved"
    IO_BOUND = "io_bound"
    COMMUNICATION_BOUND = "communication_bound"
    STRAGGLER = "straggler"
    GPU_MEMORY_HEADROOM = "gpu_memory_headroom"
    NO_THROUGHPUT = "no_throughput"  # nothing else found, and a node printed no samples/s
    HEALTHY = "healthy"


class Severity(str, Enum):  # in rising order
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


@dataclass(frozen=True)
class NodeHealth:
    smi_q: str | None = None  # `nvidia-smi -q` output
    kernel_log: str | None = None  # dmesg / journalctl -k lines


@dataclass(frozen=True)
class Context:
    instance_type: str
    vcpus: int  # per node
    gpus: int  # GPUs the type has (catalog)
    network_gbps: float  # the type's bandwidth (catalog)
    framework: str = "mxnet"  # "mxnet" | "torch" ("torchrun" reads as torch)
    stall_after: float = 600.0  # train.stall_after
    now: float | None = None  # None: the newest sample's time
    health: Mapping[int, NodeHealth] = field(default_factory=lambda: MappingProxyType({}))
    dataset_lazy: bool = False  # the dataset volume is a fresh snapshot clone, not prewarmed


@dataclass(frozen=True)
class Finding:
    kind: Kind
    nodes: tuple[int, ...]
    evidence: str
    fix: str
    severity: Severity

    def to_json(self) -> dict:
        return {"kind": self.kind.value, "nodes": list(self.nodes), "evidence": self.evidence,
                "fix": self.fix, "severity": self.severity.value}


# The series kept per node: (sample key, sub-key or None, name).
_SERIES = (("job_cpu", None, "job_cpu"), ("samples_per_s", None, "sps"),
           ("cpu", "iowait", "iowait"), ("net", "rx_Bps", "rx"), ("net", "tx_Bps", "tx"))


@dataclass
class _Node:
    node: int
    samples: list[dict]
    # _SERIES, "util" (per sample, mean over the GPUs), "read_ms"/"read_mbps" (samples read)
    s: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    util_max: list[float | None] = field(default_factory=list)  # per sample, busiest GPU
    mem: dict[int, tuple[float, float]] = field(default_factory=dict)  # GPU: fullest used, total
    gpu_count: int | None = None  # GPUs in the newest sample with the key
    device: str | None = None

    def mean(self, name: str) -> float | None:
        return _mean(self.s[name])


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100  # interpolated between the ranks around it
    low, high = int(pos), min(int(pos) + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def _num(value: object) -> float | None:
    return None if isinstance(value, bool) or not isinstance(value, (int, float)) else float(value)


def _recent(samples: Sequence[Mapping], key: str, count: int) -> float | None:
    """The mean of ``key`` among the newest ``count`` samples (None: none has one)."""
    return _mean([v for s in samples[-count:] for v in [_num(s.get(key))] if v is not None])


def now(samples: Sequence[Mapping]) -> tuple[float | None, float | None]:
    """A node's (job CPU, samples/s) now, from its samples (oldest first): the job CPU of
    its newest sample, the samples/s over its newest RATE_RECENT. `top`'s columns and the
    findings' figures are these, so a column and the finding beside it say the same."""
    return _recent(samples, "job_cpu", 1), _recent(samples, "samples_per_s", RATE_RECENT)


def cores(value: float) -> str:
    """Cores as `top` and the findings write them: two decimals under 1 (0.04, not 0.0),
    one under 10, none above."""
    return f"{value:.2f}" if value < 1 else f"{value:.1f}" if value < 10 else f"{value:.0f}"


def _cores_per_node(values: Sequence[float], vcpus: int) -> str:
    low, high = cores(min(values)), cores(max(values))
    span = low if low == high else f"{low} to {high}"
    return f"job CPU {span} of {vcpus} cores" + (" per node" if len(values) > 1 else "")


def _summarise(node: int, samples: Sequence[dict]) -> _Node:
    n = _Node(node, sorted(samples, key=lambda s: s["t"]))
    for s in n.samples:
        _add_gpus(n, s)
        for key, sub, name in _SERIES:
            value = _num((s.get(key) or {}).get(sub) if sub else s.get(key))
            if value is not None:
                n.s[name].append(value)
        disk = s.get("disk") or {}
        ms, mbps = _num(disk.get("read_ms_per_op")), _num(disk.get("read_MBps"))
        if ms is not None and mbps:  # a sample without reads says nothing of their latency
            n.s["read_ms"].append(ms)
            n.s["read_mbps"].append(mbps)
            n.device = disk.get("device")
    return n


def _add_gpus(n: _Node, sample: dict) -> None:
    if "gpus" not in sample:
        n.util_max.append(None)
        return
    gpus = sample["gpus"] or []
    n.gpu_count = len(gpus)
    utils = [u for u in (_num(g.get("util")) for g in gpus) if u is not None]
    n.util_max.append(max(utils) if utils else None)
    if utils:
        n.s["util"].append(sum(utils) / len(utils))
    for g in gpus:
        used, total = _num(g.get("mem_used")), _num(g.get("mem_total"))
        if used is not None and total and used / total > _frac(n.mem.get(g.get("index", 0))):
            n.mem[g.get("index", 0)] = (used, total)


def _frac(pair: tuple[float, float] | None) -> float:
    return pair[0] / pair[1] if pair else -1.0


def _iowait(n: _Node) -> str:
    iow = n.mean("iowait")
    return "n/a" if iow is None else f"{iow:.1f}%"


def _starved(n: _Node, ctx: Context) -> str | None:
    cpu, iow, util = n.mean("job_cpu"), n.mean("iowait"), n.s["util"]
    if not util or cpu is None or cpu < CPU_SATURATED * ctx.vcpus:
        return None
    mean, p5, p95 = _mean(util) or 0.0, _pct(util, 5), _pct(util, 95)
    if (mean >= GPU_UTIL_LOW and p95 - p5 <= GPU_UTIL_SWING) or (iow or 0.0) >= IOWAIT_QUIET:
        return None
    return (f"GPU util mean {mean:.0f}% (p5 {p5:.0f}%, p95 {p95:.0f}%) while job CPU "
            f"{cpu:.1f} of {ctx.vcpus} cores and iowait {_iowait(n)}")


def _io_bound(n: _Node, ctx: Context) -> str | None:
    iow, lat, util = n.mean("iowait"), n.mean("read_ms"), n.mean("util")
    slow = (iow or 0.0) > IOWAIT_HIGH or (lat or 0.0) > READ_MS_HIGH
    if not slow or (util is not None and util >= GPU_UTIL_LOW):
        return None
    text = f"iowait mean {_iowait(n)}"
    if lat is not None:
        text += (f", dataset volume {n.device or '?'} {lat:.1f} ms per read at "
                 f"{n.mean('read_mbps') or 0.0:.0f} MB/s")
    return text + (f" while GPU util mean {util:.0f}%" if util is not None else "")


def _headroom(n: _Node, ctx: Context) -> str | None:
    util = n.mean("util")
    if util is None or util < GPU_UTIL_BUSY or not n.mem:
        return None
    used, total = max(n.mem.values(), key=_frac)
    if used / total >= MEM_HEADROOM:
        return None
    return (f"GPU memory at most {used / 1024:.1f} of {total / 1024:.0f} GiB "
            f"({used / total:.0%}) on every GPU while util mean {util:.0f}%")


def _communication(n: _Node, ctx: Context) -> str | None:
    bandwidth = ctx.network_gbps * 1e9 / 8
    rx, tx, util, cpu = n.mean("rx"), n.mean("tx"), n.mean("util"), n.mean("job_cpu")
    peak = max(rx or 0.0, tx or 0.0)
    if bandwidth <= 0 or peak < NET_SATURATED * bandwidth:
        return None
    if (util is not None and util >= GPU_UTIL_LOW) or (cpu or 0.0) >= CPU_SATURATED * ctx.vcpus:
        return None
    gpu = f"GPU util mean {util:.0f}%" if util is not None else "no GPUs"
    return (f"network rx {(rx or 0) / 1e9:.2f} GB/s, tx {(tx or 0) / 1e9:.2f} GB/s "
            f"({peak / bandwidth:.0%} of {ctx.network_gbps:g} Gbps) while {gpu} and job CPU "
            f"{cpu or 0.0:.1f} of {ctx.vcpus} cores")


def _straggler(n: _Node, nodes: Sequence[_Node]) -> str | None:
    others = [o for o in nodes if o.node != n.node]
    sps = [o.mean("sps") or 0.0 for o in others if o.s["sps"]]
    if n.s["sps"] and sps:
        mine, median = n.mean("sps") or 0.0, statistics.median(sps)
        if mine < STRAGGLER_RATIO * median:
            return (f"{mine:.0f} samples/s vs median {median:.0f} of the other {len(sps)} "
                    f"({mine / median:.0%})")
    utils = [o.mean("util") or 0.0 for o in others if o.s["util"]]
    if n.s["util"] and utils:
        mine, median = n.mean("util") or 0.0, statistics.median(utils)
        if mine < median - STRAGGLER_UTIL_GAP:
            return f"GPU util mean {mine:.0f}% vs median {median:.0f}% of the other {len(utils)}"
    return None


def _idle(n: _Node, i: int) -> bool:
    if n.util_max[i] is not None:
        return n.util_max[i] < STALL_UTIL
    if "gpus" in n.samples[i]:
        return False  # GPUs without a util figure: unknown, not idle
    cpu = _num(n.samples[i].get("job_cpu"))
    return cpu is not None and cpu < STALL_CPU


def _stalled(n: _Node, ctx: Context, now: float) -> float | None:
    """Seconds the node has been idle with no progress line, when that is a stall."""
    if now - n.samples[-1]["t"] > SAMPLES_LIVE_S:
        return None  # its samples stopped: lost, not stalled
    first = n.samples[0]["t"] - (_num(n.samples[0].get("dt")) or 0.0)
    marks = [_num(s.get("progress_at")) for s in n.samples]
    progress = max((m for m in marks if m is not None), default=None)
    quiet = now - (first if progress is None else progress)
    idle_from = None
    for i in range(len(n.samples) - 1, -1, -1):
        if not _idle(n, i):
            break
        idle_from = n.samples[i]["t"] - (_num(n.samples[i].get("dt")) or 0.0)
    idle = min(quiet, now - idle_from) if idle_from is not None else None
    return idle if idle is not None and idle >= ctx.stall_after else None


def _starved_fix(threads: str, less_work: str) -> str:
    """The data-starved fix in a framework's words: its decoding ``threads`` setting and
    how to make each sample cheaper to load."""
    return (f"the input pipeline is CPU-bound: set {threads} ({{per_gpu}}) and no more, "
            f"{less_work}, or pick a type with more vCPUs per GPU")


def _no_throughput_fix(printer: str) -> str:
    """The no-throughput fix, ``printer``: who prints the samples/s, and how."""
    return (f"print the samples/s on every {printer}, or set train.throughput_pattern to a "
            "regex whose one group captures what your script prints; without it nothing "
            "judges the job's speed (stragglers by samples/s, the report's samples, "
            "`scaling`)")


_FIXES = {  # (kind, "torch" | "mxnet" | None: either; "lazy" for a fresh clone) -> fix
    (Kind.DATA_STARVED, "torch"): _starved_fix(
        "the DataLoader's num_workers to the vCPUs per GPU process",
        "pre-resize/pre-decode the dataset"),
    (Kind.DATA_STARVED, "mxnet"): _starved_fix(
        "--data-nthreads to the vCPUs per GPU", "pre-resize the RecordIO (im2rec --resize)"),
    (Kind.COMMUNICATION_BOUND, "torch"): "gradient all-reduce fills the network: a larger "
    "batch per GPU (or gradient accumulation) exchanges less per sample; or a type with more "
    "bandwidth (EFA)",
    (Kind.COMMUNICATION_BOUND, "mxnet"): "parameter-server traffic fills the network: run more"
    " servers per node (train.servers_per_node) or a larger batch (fewer pushes and pulls per "
    "sample)",
    (Kind.IO_BOUND, "lazy"): "the clone is still loading lazily from S3: set "
    "storage.dataset.initialization_rate or run `clusterkit deploy-dataset --prewarm`",
    (Kind.IO_BOUND, None): "the dataset volume is the limit: raise storage.dataset.iops and "
    "storage.dataset.throughput, or copy the dataset to storage.scratch (instance store)",
    (Kind.GPU_MEMORY_HEADROOM, None): "the GPUs are busy with memory to spare: raise the batch "
    "size (about 2x, scaling the learning rate with it) for more samples/s",
    (Kind.NO_THROUGHPUT, "mxnet"): _no_throughput_fix(
        "worker (MXNet's mx.callback.Speedometer: `Speed: N samples/sec`)"),
    (Kind.NO_THROUGHPUT, None): _no_throughput_fix("rank (`N samples/s`)"),
}


def _fix(kind: Kind, ctx: Context) -> str:
    flavour = "torch" if ctx.framework.lower().startswith("torch") else "mxnet"
    keys = [(kind, "lazy")] if ctx.dataset_lazy else []
    text = next(_FIXES[k] for k in [*keys, (kind, flavour), (kind, None)] if k in _FIXES)
    return text.format(per_gpu=max(1, ctx.vcpus // max(1, ctx.gpus)))


_RULES = ((Kind.DATA_STARVED, _starved, Severity.WARNING),
          (Kind.IO_BOUND, _io_bound, Severity.WARNING),
          (Kind.COMMUNICATION_BOUND, _communication, Severity.WARNING),
          (Kind.GPU_MEMORY_HEADROOM, _headroom, Severity.INFO))


def _join(hits: Sequence[tuple[int, str]], shown: int = 3) -> str:
    text = "; ".join(f"node {node}: {line}" for node, line in hits[:shown])
    more = len(hits) - shown
    return text + (f"; and {more} more node(s) alike" if more > 0 else "")


def _node_rules(nodes: Sequence[_Node], ctx: Context) -> list[Finding]:
    found = []
    for kind, rule, severity in _RULES:
        hits = [(n.node, line) for n in nodes for line in [rule(n, ctx)] if line]
        if hits:
            found.append(Finding(kind, tuple(h[0] for h in hits), _join(hits), _fix(kind, ctx),
                                 severity))
    return found


def _stall_finding(nodes: Sequence[_Node], ctx: Context, now: float) -> Finding | None:
    hits = [(n, s) for n in nodes for s in [_stalled(n, ctx, now)] if s is not None]
    if not hits:
        return None
    minutes = min(s for _n, s in hits) / 60
    idles = {True: f"GPU util under {STALL_UTIL:.0f}% on every GPU",
             False: f"job CPU under {STALL_CPU} cores"}
    lines = [(n.node, f"no progress line and {idles[bool(n.s['util'])]} for {s / 60:.0f} min "
                      f"while samples still arrive (newest {now - n.samples[-1]['t']:.0f} s old)")
             for n, s in hits]
    what = "job CPU idle" if all(not n.s["util"] for n, _s in hits) else "GPUs idle"
    fix = (f"no progress line and {what} for {minutes:.0f} min while its processes live: the "
           "job is signalled to checkpoint; train.stop_on_stall: true stops it")
    return Finding(Kind.STALLED, tuple(n.node for n, _s in hits), _join(lines), fix,
                   Severity.CRITICAL)


def _straggler_finding(nodes: Sequence[_Node], stalled: set[int]) -> Finding | None:
    live = [n for n in nodes if n.node not in stalled]
    hits = [(n.node, line) for n in live for line in [_straggler(n, live)] if line]
    if not hits:
        return None
    names = ", ".join(str(node) for node, _line in hits)
    names = f"node {names} holds" if len(hits) == 1 else f"nodes {names} hold"
    fix = (f"{names} back every synchronous step: compare GPU clocks, temperature and data "
           "path with the others'; if it stays slow, terminate it: with train.max_recoveries > 0"
           " it is replaced like a reclaimed one")
    return Finding(Kind.STRAGGLER, tuple(h[0] for h in hits), _join(hits), fix, Severity.WARNING)


def _unhealthy(nodes: Sequence[_Node], ctx: Context) -> Finding | None:
    by_node = {n.node: n for n in nodes}
    hits, meanings, reset_only = [], [], True
    for node in sorted(set(by_node) | set(ctx.health)):
        health = ctx.health.get(node) or NodeHealth()
        count = by_node[node].gpu_count if node in by_node else None
        found = problems(health.kernel_log or "", health.smi_q or "", count, ctx.gpus)
        if found:
            hits.append((node, ", ".join(p[0] for p in found)))
        meanings += [p[1] for p in found if p[1] not in meanings]
        reset_only = reset_only and all(p[2] for p in found)
    if not hits:
        return None
    fix = ("; ".join(meanings) + ": terminate that node's instance: with "
           "train.max_recoveries > 0 it is replaced like a reclaimed one (else `up` does)")
    severity = Severity.WARNING if reset_only else Severity.CRITICAL
    return Finding(Kind.UNHEALTHY_GPU, tuple(h[0] for h in hits), _join(hits, 8), fix, severity)


def _summary(nodes: Sequence[_Node], ctx: Context) -> str:
    """The nodes as `top` shows them now: GPU util over the window, each node's job CPU
    and samples/s (``now``: the same figures as `top`'s columns)."""
    util = _mean([u for n in nodes for u in n.s["util"]])
    figures = [now(n.samples) for n in nodes]
    cpu = [c for c, _ in figures if c is not None]
    sps = [r for _, r in figures if r is not None]
    span = max(n.samples[-1]["t"] - n.samples[0]["t"] for n in nodes)
    parts = [f"{len(nodes)} node(s) over {span / 60:.1f} min",
             "" if util is None else f"GPU util mean {util:.0f}%",
             _cores_per_node(cpu, ctx.vcpus) if cpu else "",
             f"{sum(sps):.0f} samples/s in all" if sps else ""]
    return ", ".join(p for p in parts if p)


def _healthy(nodes: Sequence[_Node], ctx: Context) -> Finding:
    """Healthy, when every node printed its samples/s; else that there is no throughput
    data (where none of them did): nothing says whether the job goes fast."""
    silent = [n.node for n in nodes if not n.s["sps"]]
    if not silent:
        return Finding(Kind.HEALTHY, tuple(n.node for n in nodes), _summary(nodes, ctx),
                       "nothing to change", Severity.INFO)
    which = "any node" if len(silent) == len(nodes) else \
        "node(s) " + ", ".join(map(str, silent))
    return Finding(Kind.NO_THROUGHPUT, tuple(silent),
                   f"no throughput data: no samples/s line from {which}; "
                   f"{_summary(nodes, ctx)}", _fix(Kind.NO_THROUGHPUT, ctx), Severity.INFO)


def diagnose(windows: Mapping[int, Sequence[dict]], ctx: Context) -> list[Finding]:
    """Every kind of trouble found, once each, naming every node it applies to (the most
    severe first); ``HEALTHY`` alone when there is none and every node has at least
    ``MIN_SAMPLES`` samples; nothing at all when no node has enough."""
    nodes = [_summarise(int(k), v) for k, v in sorted(windows.items(), key=lambda kv: int(kv[0]))
             if len(v) >= MIN_SAMPLES]
    now = max((n.samples[-1]["t"] for n in nodes), default=0.0) if ctx.now is None else ctx.now
    stall = _stall_finding(nodes, ctx, now)
    straggler = _straggler_finding(nodes, set(stall.nodes) if stall else set())
    found = [f for f in (_unhealthy(nodes, ctx), stall, straggler) if f] + _node_rules(nodes, ctx)
    if not found and nodes and len(nodes) == len(windows):
        found.append(_healthy(nodes, ctx))
    return sorted(found, key=lambda f: (-list(Severity).index(f.severity),
                                        list(Kind).index(f.kind)))
