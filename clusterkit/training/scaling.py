"""The scaling table of the MXNet guide, from measured throughput: nodes, GPUs,
samples/s, speedup over the smallest run, efficiency (% of linear), and $ per million
samples at the nodes' prices; as text, CSV and a PNG chart's data. PURE."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Measure:
    """One run: the first ``nodes`` nodes, their GPUs, the steady-state samples/s and
    what those nodes cost an hour (None: a price unknown)."""

    nodes: int
    gpus: int
    samples_per_s: float | None
    usd_per_hour: float | None


@dataclass(frozen=True)
class Row:
    nodes: int
    gpus: int
    samples_per_s: float | None
    speedup: float | None
    efficiency: float | None  # % of linear in nodes
    usd_per_million: float | None


def rows(measures: Sequence[Measure]) -> list[Row]:
    """Speedup and efficiency against the smallest run that measured a throughput."""
    ordered = sorted(measures, key=lambda m: m.nodes)
    base = next((m for m in ordered if m.samples_per_s), None)
    out = []
    for m in ordered:
        speedup = m.samples_per_s / base.samples_per_s if base and m.samples_per_s else None
        ideal = m.nodes / base.nodes if base else None
        cost = (m.usd_per_hour / (m.samples_per_s * 3600) * 1e6
                if m.usd_per_hour is not None and m.samples_per_s else None)
        out.append(Row(m.nodes, m.gpus, m.samples_per_s, speedup,
                       100 * speedup / ideal if speedup and ideal else None, cost))
    return out


def _fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def lines(table: Sequence[Row]) -> list[str]:
    out = [f"{'nodes':>5} {'GPUs':>5} {'samples/s':>11} {'speedup':>8} {'efficiency':>10} "
           f"{'$/M samples':>11}"]
    for r in table:
        out.append(f"{r.nodes:>5} {r.gpus:>5} {_fmt(r.samples_per_s, ',.1f'):>11} "
                   f"{_fmt(r.speedup, '.2f'):>8} {_fmt(r.efficiency, '.0f') + '%':>10} "
                   f"{_fmt(r.usd_per_million, '.4f'):>11}")
    return out


def csv_text(table: Sequence[Row]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["nodes", "gpus", "samples_per_s", "speedup", "efficiency_pct",
                     "usd_per_million_samples"])
    for r in table:
        writer.writerow([r.nodes, r.gpus, *("" if v is None else f"{v:.6g}" for v in (
            r.samples_per_s, r.speedup, r.efficiency, r.usd_per_million))])
    return buffer.getvalue()
