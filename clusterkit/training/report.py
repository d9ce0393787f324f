"""A job's report, like `jobstats` on an HPC cluster: per node and in total, wall time,
GPU utilization (mean, p5, p95), the job's mean CPU, steady-state samples/s, samples in
all, what the job cost at the prices its nodes were launched at beside on-demand, and
the node-hours and dollars each recovery lost. PURE: from each node's running totals
(``node/totals.py``: summary.json) and what the client knows of the nodes.

``JobReport`` is a wire record (``clusterkit.node.wire``): kept as report.json on the
master (``cluster/jobs/report.py`` writes and reads it), read back by a later client."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar

from clusterkit.node.totals import Summary, Totals, percentile
from clusterkit.node.wire import (
    WireError,
    as_dict,
    as_float,
    as_int,
    as_list,
    as_sizes,
    as_str,
    stamped,
    version_of,
)
from clusterkit.plan.cost import usd
from clusterkit.training import preflight
from clusterkit.training.sizes import describe as describe_sizes


@dataclass(frozen=True)
class NodeFacts:
    """What the client knows of a node: its name, type, launch price, on-demand price."""

    index: int
    name: str
    instance_type: str
    price: float | None  # USD/h it was launched at (spot or on-demand)
    on_demand: float | None  # USD/h on-demand for its type and region


@dataclass(frozen=True)
class NodeReport:
    index: int
    name: str
    wall_s: float
    gpus: int | None
    gpu_mean: float | None
    gpu_p5: float | None
    gpu_p95: float | None
    cpu_mean: float | None  # cores
    samples_per_s: float | None  # steady state
    samples: float
    cost: float | None
    on_demand_cost: float | None

    @classmethod
    def from_json(cls, data: object, where: str) -> NodeReport:
        if not isinstance(data, dict):
            raise WireError(JobReport.KIND, where, "has a node that is not an object")

        def num(key: str) -> float | None:
            return as_float(data.get(key))

        return cls(as_int(data.get("index"), 0) or 0, as_str(data.get("name"), "") or "",
                   num("wall_s") or 0.0, as_int(data.get("gpus")), num("gpu_mean"),
                   num("gpu_p5"), num("gpu_p95"), num("cpu_mean"), num("samples_per_s"),
                   num("samples") or 0.0, num("cost"), num("on_demand_cost"))


@dataclass(frozen=True)
class JobReport:
    KIND: ClassVar[str] = "job report"
    VERSION: ClassVar[int] = 1

    cluster: str
    job_id: str
    state: str
    started: float | None
    ended: float | None
    nodes: tuple[NodeReport, ...]
    findings: tuple[Mapping[str, Any], ...] = ()
    recoveries: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    preflight: Mapping[str, Any] | None = None  # `train --preflight`'s record (preflight.py)
    budget: Mapping[str, Any] | None = None  # spend against the cap (training/budget.py)
    sizes: tuple[tuple[float, int], ...] = ()  # an elastic job's (epoch, nodes) changes

    @property
    def wall_s(self) -> float:
        return max((n.wall_s for n in self.nodes), default=0.0)

    @property
    def samples_per_s(self) -> float | None:
        rates = [n.samples_per_s for n in self.nodes if n.samples_per_s is not None]
        return sum(rates) if rates else None

    @property
    def samples(self) -> float:
        return sum(n.samples for n in self.nodes)

    def total(self, what: str) -> float | None:
        values = [getattr(n, what) for n in self.nodes]
        return None if any(v is None for v in values) else sum(values)

    def to_json(self) -> dict[str, Any]:
        """report.json: the report, and its totals (read back, they are computed again)."""
        return stamped(self.VERSION, {
            "cluster": self.cluster, "job_id": self.job_id, "state": self.state,
            "started": self.started, "ended": self.ended,
            "nodes": [asdict(n) for n in self.nodes],
            "findings": [dict(f) for f in self.findings],
            "recoveries": [dict(r) for r in self.recoveries],
            "wall_s": self.wall_s, "samples_per_s": self.samples_per_s,
            "samples": self.samples, "cost": self.total("cost"),
            "on_demand_cost": self.total("on_demand_cost"),
            **({"preflight": dict(self.preflight)} if self.preflight else {}),
            **({"budget": dict(self.budget)} if self.budget else {}),
            **({"sizes": [list(x) for x in self.sizes]} if self.sizes else {})})

    @classmethod
    def from_json(cls, data: object, where: str) -> JobReport:
        """A report as ``to_json`` wrote it (report.json on the master)."""
        data = version_of(data, cls.KIND, cls.VERSION, where)
        return cls(as_str(data.get("cluster"), "") or "", as_str(data.get("job_id"), "") or "",
                   as_str(data.get("state"), "") or "", as_float(data.get("started")),
                   as_float(data.get("ended")),
                   tuple(NodeReport.from_json(n, where) for n in as_list(data.get("nodes"))),
                   tuple(f for f in map(as_dict, as_list(data.get("findings"))) if f),
                   tuple(r for r in map(as_dict, as_list(data.get("recoveries"))) if r),
                   as_dict(data.get("preflight")) or None, as_dict(data.get("budget")) or None,
                   as_sizes(data.get("sizes")))


def node_report(facts: NodeFacts, kept: Summary | Mapping[str, Any] | None,
                started: float | None, ended: float | None) -> NodeReport:
    """One node's line: its totals over the job's run (``started``..``ended``, else the
    samples' own first and last time)."""
    totals = Totals(kept if isinstance(kept, Summary) else dict(kept or {}))
    begin = started if started is not None else totals.first_t
    end = ended if ended is not None else totals.last_t
    wall = max(0.0, (end or 0.0) - (begin or 0.0)) if begin is not None else 0.0
    hours = wall / 3600
    gpu = totals.gpu_seconds > 0
    mean = (sum(v * s for v, s in enumerate(totals.util_hist)) / totals.gpu_seconds
            if gpu else None)
    return NodeReport(
        facts.index, facts.name, wall, totals.gpus, mean,
        percentile(totals.util_hist, 0.05) if gpu else None,
        percentile(totals.util_hist, 0.95) if gpu else None,
        totals.cpu_core_seconds / totals.cpu_seconds if totals.cpu_seconds else None,
        totals.steady_samples / totals.steady_seconds if totals.steady_seconds else None,
        totals.samples,
        facts.price * hours if facts.price is not None else None,
        facts.on_demand * hours if facts.on_demand is not None else None)


def build(cluster: str, job_id: str, state: str, started: float | None,
          ended: float | None, facts: Sequence[NodeFacts],
          totals: Mapping[int, Summary | Mapping[str, Any]],
          findings: Sequence[Mapping[str, Any]] = (),
          recoveries: Sequence[Mapping[str, Any]] = (),
          preflight: Mapping[str, Any] | None = None,
          budget: Mapping[str, Any] | None = None) -> JobReport:
    return JobReport(cluster, job_id, state, started, ended,
                     tuple(node_report(f, totals.get(f.index), started, ended)
                           for f in sorted(facts, key=lambda f: f.index)),
                     tuple(findings), tuple(recoveries), preflight, budget)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}%"


def _usd(value: float | None) -> str:
    return "-" if value is None else f"${value:,.2f}"


def lines(report: JobReport) -> list[str]:
    """The report as text: a header, a line per node, the total, findings, recoveries."""
    out = [f"job {report.job_id} on cluster {report.cluster}: {report.state}, "
           f"{report.wall_s / 60:.1f} min"]
    for n in report.nodes:
        gpu = (f"GPU {_pct(n.gpu_mean)} (p5 {_pct(n.gpu_p5)}, p95 {_pct(n.gpu_p95)})"
               if n.gpus else "no GPU")
        cpu = "-" if n.cpu_mean is None else f"{n.cpu_mean:.2f} cores"
        rate = "-" if n.samples_per_s is None else f"{n.samples_per_s:,.1f} samples/s"
        out.append(f"  {n.name}: {gpu}, job CPU {cpu}, {rate}, {n.samples:,.0f} samples, "
                   f"{_usd(n.cost)} (on-demand {_usd(n.on_demand_cost)})")
    rate = report.samples_per_s
    out.append(f"  total: {'-' if rate is None else f'{rate:,.1f}'} samples/s steady, "
               f"{report.samples:,.0f} samples, cost {_usd(report.total('cost'))} "
               f"(on-demand would have cost {_usd(report.total('on_demand_cost'))})")
    out += [f"  finding: {f.get('kind')}: {f.get('evidence')}" for f in report.findings]
    out += [f"  recovery: {r.get('describe') or r}" for r in report.recoveries]
    grew = describe_sizes(report.sizes, report.ended or report.sizes[-1][0],
                          report.sizes[0][1]) if report.sizes else ""
    out += [f"  {grew}"] if grew else []
    out += [f"  {line}" for line in preflight_lines(report.preflight)]
    out += [f"  {line}" for line in budget_lines(report.budget)]
    return out


def budget_lines(kept: Mapping[str, Any] | None) -> list[str]:
    """``budget: spent $0.0512 of the $0.0500 cap (train.max_cost), every instance the
    job used; stopped by the cap`` (nothing when the job had no cap)."""
    if not kept:
        return []
    spent, cap = as_float(kept.get("spent")), as_float(kept.get("cap"))
    if spent is None or cap is None:
        return ["budget: a record this client does not read"]
    acted = as_str(kept.get("acted"), "under")
    how = {"checkpoint": "; stopped by the cap after the checkpoint signal",
           "stop": "; stopped by the cap"}.get(acted or "", "")
    return [f"budget: spent {usd(spent)} of the {usd(cap)} cap (train.max_cost), every "
            f"instance the job used{how}"]


def preflight_lines(kept: Mapping[str, Any] | None) -> list[str]:
    """The preflight's lines (``preflight.lines``); one line when the record does not
    read (a newer client's)."""
    if not kept:
        return []
    try:
        return preflight.lines(preflight.Preflight.from_json(kept))
    except (KeyError, TypeError, ValueError):
        return ["preflight: a record this client does not read"]

