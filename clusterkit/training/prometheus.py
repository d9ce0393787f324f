"""A running job as Prometheus metrics (`clusterkit top NAME --prometheus`), PURE: a
``Snapshot`` of every node (its newest samples, launch price and start) in, the metric
families ``prometheus_client`` exposes out. The serving half is
``cluster/jobs/exporter.py``; docs/howto/prometheus.md has the table for users.

Names follow Prometheus's conventions: a ``clusterkit_`` prefix, base units (bytes,
seconds, ratios 0..1 for percentages, degrees Celsius, watts), every value a gauge
(the sampler hands rates over its interval, not counters: the node's network and disk
are ``..._bytes_per_second``), labels ``cluster``, ``node`` (master / worker-2) and
``gpu`` (its index). A node's price keeps AWS's unit, dollars per hour.

What a sample holds is ``node/samples.py``'s ``Sample`` (its ``to_json``, as ``top``
keeps and ``training/diagnose.py`` reads them): job CPU in cores, CPU time in % of the
node's, memory in MiB, network in bytes/s, the dataset volume in MB/s (10^6 bytes) and
ms per read, each GPU's utilization in %, memory in MiB, power in W, temperature in C."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from clusterkit.training import diagnose
from clusterkit.training.diagnose import now as figures_now  # no clock: a window's figures

MIB = 1024 * 1024
MB = 1e6
NODE = ("cluster", "node")
GPU = (*NODE, "gpu")
CPU_MODES = ("user", "system", "idle", "iowait")
SEVERITY = {diagnose.Severity.INFO: 1, diagnose.Severity.WARNING: 2,
            diagnose.Severity.CRITICAL: 3}

# name -> (help, label names): every family exported, in this order
METRICS: dict[str, tuple[str, tuple[str, ...]]] = {
    "clusterkit_job_info": ("The job exported (always 1).", ("cluster", "job_id")),
    "clusterkit_node_up": ("1 when the node answered the last refresh with a sample, "
                           "else 0.", NODE),
    "clusterkit_node_info": ("The node's instance type (always 1).",
                             (*NODE, "instance_type")),
    "clusterkit_node_sample_timestamp_seconds": ("Unix time of the node's newest sample.",
                                                 NODE),
    "clusterkit_node_price_dollars_per_hour": ("The price the node was launched at "
                                               "(spot or on-demand), USD per hour.", NODE),
    "clusterkit_job_cost_dollars": ("What the job has cost on the node so far: its launch "
                                    "price times the time since its processes started.",
                                    NODE),
    "clusterkit_job_spent_dollars": ("What the job has spent against its cap (train.max_cost): "
                                     "every node it used, standbys and replacements "
                                     "included; absent without a cap.", ("cluster",)),
    "clusterkit_job_cap_dollars": ("The job's spending cap (train.max_cost); absent "
                                   "without one.", ("cluster",)),
    "clusterkit_job_cpu_cores": ("CPU the job's processes use on the node, in cores "
                                 "(CPU-seconds per second).", NODE),
    "clusterkit_samples_per_second": ("The job's throughput on the node (its samples/s "
                                      "lines, smoothed as `top` shows it).", NODE),
    "clusterkit_node_cpu_ratio": ("The node's CPU time by mode over the last sample "
                                  "interval (0..1).", (*NODE, "mode")),
    "clusterkit_node_memory_used_bytes": ("The node's memory in use (total less "
                                          "available).", NODE),
    "clusterkit_node_memory_total_bytes": ("The node's memory.", NODE),
    "clusterkit_node_network_receive_bytes_per_second": ("Bytes the node received per "
                                                         "second.", NODE),
    "clusterkit_node_network_transmit_bytes_per_second": ("Bytes the node sent per second.",
                                                          NODE),
    "clusterkit_node_disk_read_bytes_per_second": ("Bytes read per second from the "
                                                   "dataset volume.", (*NODE, "device")),
    "clusterkit_node_disk_read_latency_seconds": ("Mean time per read on the dataset "
                                                  "volume.", (*NODE, "device")),
    "clusterkit_gpu_info": ("The GPU's model (always 1).", (*GPU, "model")),
    "clusterkit_gpu_utilization_ratio": ("The GPU's utilization (0..1).", GPU),
    "clusterkit_gpu_memory_used_bytes": ("The GPU's memory in use.", GPU),
    "clusterkit_gpu_memory_total_bytes": ("The GPU's memory.", GPU),
    "clusterkit_gpu_temperature_celsius": ("The GPU's temperature.", GPU),
    "clusterkit_gpu_power_watts": ("The GPU's power draw.", GPU),
    "clusterkit_finding": ("The diagnosis on the node, one series per kind: 0 not found, "
                           "1 info, 2 warning, 3 critical.", (*NODE, "kind")),
}


@dataclass(frozen=True)
class NodeView:
    """What the exporter knows of a node at a refresh."""

    index: int
    name: str  # master / worker-2
    instance_type: str
    price: float | None  # USD/h it was launched at
    started: float | None  # when the job's processes started here (its state.json)
    samples: tuple[Mapping[str, Any], ...] = ()  # Sample.to_json() records, oldest first
    error: str | None = None  # it did not answer, or has no sample yet

    @property
    def last(self) -> Mapping[str, Any] | None:
        return self.samples[-1] if self.samples and self.error is None else None


@dataclass(frozen=True)
class Snapshot:
    """Every node of a job at a refresh, and what the diagnosis found then."""

    cluster: str
    job_id: str
    nodes: tuple[NodeView, ...]
    findings: tuple[diagnose.Finding, ...] = ()
    budget: Mapping[str, Any] | None = None  # training.budget.Status.to_json (None: no cap)


def _num(value: object, scale: float = 1.0) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) * scale


class _Families:
    """The families of METRICS being filled; a None value adds no sample."""

    def __init__(self) -> None:
        self.by_name = {name: GaugeMetricFamily(name, doc, labels=list(labels))
                        for name, (doc, labels) in METRICS.items()}

    def add(self, name: str, labels: Sequence[str], value: float | None) -> None:
        if value is not None:
            self.by_name[name].add_metric(list(labels), value)


def _node(out: _Families, cluster: str, node: NodeView) -> None:
    labels = (cluster, node.name)
    last = node.last
    out.add("clusterkit_node_up", labels, 0.0 if last is None else 1.0)
    out.add("clusterkit_node_info", (*labels, node.instance_type), 1.0)
    out.add("clusterkit_node_price_dollars_per_hour", labels, node.price)
    if last is None:
        return
    t = _num(last.get("t"))
    out.add("clusterkit_node_sample_timestamp_seconds", labels, t)
    if node.price is not None and node.started is not None and t is not None:
        out.add("clusterkit_job_cost_dollars", labels,
                node.price * max(0.0, t - node.started) / 3600)
    cpu, rate = figures_now(node.samples)
    out.add("clusterkit_job_cpu_cores", labels, cpu)
    out.add("clusterkit_samples_per_second", labels, rate)
    _system(out, labels, last)
    for i, gpu in enumerate(last.get("gpus") or ()):
        _gpu(out, (*labels, str(gpu.get("index", i))), gpu)


def _system(out: _Families, labels: tuple[str, str], last: Mapping[str, Any]) -> None:
    """The node's CPU, memory, network and dataset volume from its newest sample."""
    cpu, mem = last.get("cpu") or {}, last.get("mem") or {}
    net, disk = last.get("net") or {}, last.get("disk") or {}
    for mode in CPU_MODES:
        out.add("clusterkit_node_cpu_ratio", (*labels, mode), _num(cpu.get(mode), 0.01))
    out.add("clusterkit_node_memory_used_bytes", labels, _num(mem.get("used_mb"), MIB))
    out.add("clusterkit_node_memory_total_bytes", labels, _num(mem.get("total_mb"), MIB))
    out.add("clusterkit_node_network_receive_bytes_per_second", labels,
            _num(net.get("rx_Bps")))
    out.add("clusterkit_node_network_transmit_bytes_per_second", labels,
            _num(net.get("tx_Bps")))
    device = (*labels, str(disk.get("device") or ""))
    out.add("clusterkit_node_disk_read_bytes_per_second", device,
            _num(disk.get("read_MBps"), MB))
    out.add("clusterkit_node_disk_read_latency_seconds", device,
            _num(disk.get("read_ms_per_op"), 0.001))


GPU_VALUES: tuple[tuple[str, str, float], ...] = (  # family, sample key, scale
    ("clusterkit_gpu_utilization_ratio", "util", 0.01),
    ("clusterkit_gpu_memory_used_bytes", "mem_used", MIB),
    ("clusterkit_gpu_memory_total_bytes", "mem_total", MIB),
    ("clusterkit_gpu_temperature_celsius", "temp", 1.0),
    ("clusterkit_gpu_power_watts", "power", 1.0))


def _gpu(out: _Families, labels: tuple[str, ...], gpu: Mapping[str, Any]) -> None:
    out.add("clusterkit_gpu_info", (*labels, str(gpu.get("name") or "")), 1.0)
    for family, key, scale in GPU_VALUES:
        out.add(family, labels, _num(gpu.get(key), scale))


def _findings(out: _Families, snapshot: Snapshot) -> None:
    """Every kind on every node: the severity of the finding naming the node, else 0."""
    found: dict[tuple[int, diagnose.Kind], int] = {}
    for finding in snapshot.findings:
        for index in finding.nodes:
            key = (index, finding.kind)
            found[key] = max(found.get(key, 0), SEVERITY[finding.severity])
    for node in snapshot.nodes:
        for kind in diagnose.Kind:
            out.add("clusterkit_finding", (snapshot.cluster, node.name, kind.value),
                    float(found.get((node.index, kind), 0)))


def families(snapshot: Snapshot | None) -> list[Metric]:
    """The metric families of ``snapshot`` (every family of METRICS, some perhaps without
    a sample: the sandbox has no GPU); none before the first refresh."""
    if snapshot is None:
        return []
    out = _Families()
    out.add("clusterkit_job_info", (snapshot.cluster, snapshot.job_id), 1.0)
    budget = snapshot.budget or {}
    out.add("clusterkit_job_spent_dollars", (snapshot.cluster,), _num(budget.get("spent")))
    out.add("clusterkit_job_cap_dollars", (snapshot.cluster,), _num(budget.get("cap")))
    for node in snapshot.nodes:
        _node(out, snapshot.cluster, node)
    _findings(out, snapshot)
    return list(out.by_name.values())


def metric_names() -> tuple[str, ...]:
    """The names a scrape holds (what a dashboard's queries may use)."""
    return tuple(METRICS)


DEFAULT_HOST = "127.0.0.1"


def parse_listen(text: str, default_host: str = DEFAULT_HOST) -> tuple[str, int]:
    """``[HOST:]PORT`` (an IPv6 host in brackets: ``[::1]:9101``) -> (host, port); a
    ValueError saying what is wrong. Port 0: one the system picks."""
    host, sep, port = text.rpartition(":")
    if sep and host.startswith("[") != host.endswith("]"):
        raise ValueError("an IPv6 host goes in brackets: [::1]:9101")
    if sep and not host.startswith("[") and ":" in host:
        raise ValueError("an IPv6 host goes in brackets: [::1]:9101")
    host = host.strip("[]") if sep else default_host
    if sep and not host:
        raise ValueError("no host before the ':'")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{port!r} is no port (0 to 65535)")
    return host, int(port)

