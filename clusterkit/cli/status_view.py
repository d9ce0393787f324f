"""`clusterkit status` on a terminal: one table per cluster (the default columns fit a
100-column terminal, --wide adds the rest), the total, and the kept EFS file systems."""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import datetime, timezone

from rich import box
from rich.console import Console
from rich.table import Table

from clusterkit.cluster.ops.status import StatusResult, StatusRow
from clusterkit.cluster.provision import kept_efs
from clusterkit.kinds import Role
from clusterkit.training.sizes import lines as size_lines

DEFAULT_COLUMNS = ("node", "type", "AZ", "market", "state", "launched", "$/h", "cost")
WIDE_COLUMNS = ("node", "instance", "type", "region", "AZ", "market", "state", "public",
                "private", "ssh", "launched", "$/h", "cost")


def local_time(iso: str | None) -> str:
    """An ISO 8601 timestamp in local time with the zone: ``2026-11-23 17:05 CET``."""
    if not iso:
        return "-"
    try:
        when = datetime.fromisoformat(iso.replace("Z", "+00:00"))
    except ValueError:
        return iso
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.astimezone().strftime("%Y-%m-%d %H:%M %Z").strip()


def usd(value: float | None, *, per_hour: bool = False) -> str:
    """Dollars: ``$1.23`` (so far), ``$0.096`` (per hour: three decimals); ``-`` unknown."""
    if value is None:
        return "?" if per_hour else "-"
    return f"${value:,.3f}" if per_hour else f"${value:,.2f}"


def node_name(row: StatusRow) -> str:
    """``master``, ``worker-2``: the name ``--node`` accepts (with the index); a
    standby: ``standby for worker-2``."""
    if row.standby_for is not None:
        return f"standby-{row.standby_for}"
    if row.index is None:
        return row.instance_id
    return "master" if row.role == Role.MASTER else f"{row.role}-{row.index}"


def _cells(row: StatusRow) -> dict[str, str]:
    return {"node": node_name(row), "instance": row.instance_id, "type": row.type,
            "region": row.region, "AZ": row.az, "market": row.market,
            "state": row.state, "public": row.public_ip or "-",
            "private": row.private_ip or "-", "ssh": row.ssh_address or "-",
            "launched": local_time(row.launch_time),
            "$/h": usd(row.price_per_hour, per_hour=True), "cost": usd(row.cost_so_far)}


def status_table(cluster: str | None, rows: Sequence[StatusRow], *,
                 wide: bool = False) -> Table:
    """One cluster's nodes. Compact box, no cell is ever cut to an ellipsis (a cell that
    does not fit wraps)."""
    columns = WIDE_COLUMNS if wide else DEFAULT_COLUMNS
    regions = ", ".join(dict.fromkeys(r.region for r in rows))
    table = Table(title=f"cluster {cluster or '?'} ({regions})", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True,
                  title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold",
                         justify="right" if col in ("$/h", "cost") else "left")
    for row in rows:
        cells = _cells(row)
        table.add_row(*(cells[col] for col in columns))
    return table


def _kept_efs(console: Console, result: StatusResult) -> None:
    """The EFS file systems the cluster keeps (deletion_policy: retain), with size and
    $/month; they bill whether or not the cluster runs."""
    for fs in result.kept_efs:
        console.print(f"kept EFS {kept_efs.describe(fs)} ({kept_efs.PRICE_NOTE}); the next "
                      f"`up` mounts it, `clusterkit down {result.cluster} --delete-efs` "
                      "deletes it", markup=False, highlight=False)


def render_status(console: Console, result: StatusResult, *, wide: bool = False) -> None:
    """One table per cluster, then the total $/h and the cost so far."""
    if not result.nodes:
        if result.remains is not None:
            _autostop(console, result)
            _stack(console, result)
            return
        what = f"cluster {result.cluster}" if result.cluster else "clusterkit clusters"
        console.print(f"no {what} in {', '.join(result.regions)}", markup=False,
                      highlight=False)
        _kept_efs(console, result)
        return
    by_cluster: dict[str | None, list[StatusRow]] = {}
    for row in result.nodes:
        by_cluster.setdefault(row.cluster, []).append(row)
    for cluster, rows in by_cluster.items():
        console.print(status_table(cluster, rows, wide=wide))
    hourly, so_far = result.hourly_usd, result.cost_so_far_usd
    per_hour = f"{usd(hourly, per_hour=True)}/h" if hourly is not None else "$/h unknown"
    console.print(f"total: {per_hour}, so far {usd(so_far) if so_far is not None else 'unknown'}",
                  markup=False, highlight=False)
    _stack(console, result)
    _standbys(console, result.nodes)
    _block_end(console, result.nodes)
    _dataset(console, result)
    _job(console, result)
    if not _autostop(console, result):
        _kept_efs(console, result)


def _autostop(console: Console, result: StatusResult) -> bool:
    """The autostop clock while the nodes run; where none runs, what is left and what
    it costs (True: that listed the file systems, kept ones too)."""
    if result.autostop is not None:
        console.print(result.autostop.describe(), markup=False, highlight=False)
    if result.remains is None or result.cluster is None:
        return False
    for line in result.remains.lines(result.cluster):
        console.print(line, markup=False, highlight=False)
    return True


def _stack(console: Console, result: StatusResult) -> None:
    """The stack's state when it is not simply there: in progress, failed, rolled back."""
    if result.stack is not None and not result.stack.settled:
        console.print(result.stack.describe(), markup=False, highlight=False)


def _standbys(console: Console, rows: Sequence[StatusRow]) -> None:
    """What a standby row is, and what it costs."""
    for row in rows:
        if row.standby_for is None:
            continue
        node = "master" if row.standby_for == 0 else f"worker-{row.standby_for}"
        console.print(f"standby-{row.standby_for} ({row.instance_id}, "
                      f"{usd(row.price_per_hour, per_hour=True)}/h): booted for {node} on its "
                      "rebalance recommendation; swapped in if its interruption notice comes, "
                      "else terminated after train.standby_minutes (or by `down`)",
                      markup=False, highlight=False)


def _block_end(console: Console, rows: Sequence[StatusRow]) -> None:
    """When the Capacity Block the nodes run in ends, and when AWS takes them."""
    from clusterkit.plan.reservation import TERMINATION_LEAD, span, utc

    for end in sorted({r.block_end for r in rows if r.block_end is not None}):
        left = end - datetime.now(timezone.utc).timestamp()
        when = f"in {span(left)}" if left > 0 else "ended"
        console.print(f"capacity block ends {utc(end)} ({when}): AWS terminates its nodes "
                      f"from {utc(end - TERMINATION_LEAD)}, and a running job gets its "
                      "checkpoint signal before", markup=False, highlight=False)


def _dataset(console: Console, result: StatusResult) -> None:
    """One line per dataset clone: node, volume, snapshot, size, hydration."""
    for d in result.dataset:
        node = "-" if d.index is None else ("master" if d.index == 0 else f"worker-{d.index}")
        console.print(f"dataset {node}: {d.volume_id} from {d.snapshot_id}, {d.size_gib} GiB, "
                      f"hydration {d.hydration}", markup=False, highlight=False)


def _job(console: Console, result: StatusResult) -> None:
    """The newest training job: its state, then one line per node with its processes."""
    job = result.job
    if not job:
        return
    why = (f": {job.failed.describe()}" if job.failed else
           f" ({job.reason})" if job.reason else "")
    console.print(f"job {job.job_id}: {job.state}{why}", markup=False, highlight=False)
    for recovery in job.recoveries:
        console.print(f"  {recovery.describe()}", markup=False, highlight=False)
    master = job.nodes.get("master")
    if master is not None:  # an elastic job's size now and over time
        ended = master.state.final
        end = master.updated if ended and master.updated else time.time()
        for line in size_lines(master.sizes, end, running=not ended):
            console.print(f"  {line}", markup=False, highlight=False)
    for other in job.others:
        console.print(f"  also: {other.describe()}", markup=False, highlight=False)
    for node, state in job.nodes.items():
        if state is None:
            console.print(f"  {node}: no such job here", markup=False, highlight=False)
            continue
        procs = ", ".join(f"{p.name} {p.state or 'unknown'}"
                          + ("" if p.exit is None else f" {p.exit}") for p in state.processes)
        console.print(f"  {node}: {state.state}" + (f": {procs}" if procs else ""),
                      markup=False, highlight=False)
