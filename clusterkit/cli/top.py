"""`clusterkit top`: option wiring and rendering only (cluster/jobs/top.py)."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from typing import TYPE_CHECKING

import click

from clusterkit.cli.context import check_target_argument, get_ctx, json_option
from clusterkit.cluster.runtime import Runtime

if TYPE_CHECKING:  # the job layer imports paramiko: loaded by the command that uses it
    from rich.console import Group
    from rich.table import Table

    from clusterkit.cluster.jobs.top import NodeRow, TopFrame


def _rate(value: float | None, unit: str = "") -> str:
    return "-" if value is None else f"{value:,.1f}{unit}"


def _bytes(value: float | None) -> str:
    if value is None:
        return "-"
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if value >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value:.0f} B/s"


def _cores(value: float | None) -> str:
    """The job's CPU as the findings write it (diagnose.cores: 0.04, not 0.0)."""
    from clusterkit.training.diagnose import cores

    return "-" if value is None else f"{cores(value)} cores"


def _gpu_cells(row: NodeRow) -> list[str]:
    if not row.gpus:
        return ["-", "-"]
    used = sum(g.mem_used or 0 for g in row.gpus)
    total = sum(g.mem_total or 0 for g in row.gpus)
    memory = f"{used / 1024:.1f}/{total / 1024:.0f} GiB" if total else "-"
    return [f"{row.gpu_util:.0f}% x{len(row.gpus)}" if row.gpu_util is not None else "-",
            memory]


def table(frame: TopFrame, gpus: bool = False) -> Table:
    """One frame: a row per node (and per GPU with ``gpus``), then the cluster's total."""
    from rich.table import Table

    out = Table(title=f"{frame.cluster}  job {frame.job_id}  "
                      f"{time.strftime('%H:%M:%S', time.localtime(frame.at))}",
                title_justify="left")
    for column in ("node", "GPU util", "GPU mem", "job CPU", "iowait", "net in",
                   "net out", "disk read", "samples/s"):
        out.add_column(column, justify="left" if column == "node" else "right")
    for row in frame.rows:
        if row.error:
            out.add_row(row.node, f"[red]{row.error}[/red]", *[""] * 7)
            continue
        out.add_row(row.node, *_gpu_cells(row), _cores(row.job_cpu),
                    _rate(row.iowait, "%"), _bytes(row.net_rx), _bytes(row.net_tx),
                    "-" if row.disk_read is None else f"{row.disk_read:.1f} MB/s",
                    _rate(row.samples_per_s))
        for gpu in row.gpus if gpus else ():
            out.add_row(f"  gpu {gpu.index}", _rate(gpu.util, "%"),
                        f"{(gpu.mem_used or 0) / 1024:.1f}/{(gpu.mem_total or 0) / 1024:.0f}"
                        " GiB", *[""] * 6)
    out.add_row("[bold]cluster[/bold]", *[""] * 7,
                f"[bold]{_rate(frame.samples_per_s)}[/bold]")
    return out


def findings_text(frame: TopFrame) -> list[str]:
    lines = frame.size_lines()  # an elastic job's size now and over time
    lines += [f"budget: {frame.budget_line}"] if frame.budget_line else []
    lines += [f"{f.severity.value}: {f.kind.value}: {f.evidence}; fix: {f.fix}"
              for f in frame.findings]
    return lines + ([f"note: {frame.gpu_note}"] if frame.gpu_note else [])


@click.command()
@click.argument("name", callback=check_target_argument)
@click.option("--gpus", is_flag=True, help="One row per GPU under each node.")
@click.option("--once", is_flag=True, help="Print one frame and exit.")
@click.option("--interval", type=click.FloatRange(0.5, 3600), default=None,
              help="Seconds between frames [default: 2; with --prometheus the job's "
                   "train.sample_interval].")
@click.option("--job", "job_id", metavar="JOB",
              help="The job id (default: the cluster's newest job).")
@click.option("--prometheus", "listen", metavar="[HOST:]PORT",
              help="Serve every node's newest sample as Prometheus metrics at "
                   "http://HOST:PORT/metrics (HOST default 127.0.0.1) until Ctrl-C: "
                   "headless, or beside the live table on a terminal.")
@json_option
def top(name: str, gpus: bool, once: bool, interval: float | None, job_id: str | None,
        listen: str | None) -> None:
    """Every node of the running job: GPUs, the job's CPU, iowait, network, disk,
    samples/s, the cluster's throughput and what limits it; an elastic job's size now
    and over time.

    Works from any terminal (a `--detach` job too). Refreshes in place until Ctrl-C;
    --once prints one frame; --json prints one JSON object per frame (one line each).
    --prometheus serves the same figures to a Prometheus server, following the
    cluster's newest job unless --job names one (docs/howto/prometheus.md).

    \b
    Examples:
      clusterkit top sandbox --once
      clusterkit top sandbox --prometheus 9101
    """
    from clusterkit.cluster.jobs.top import open_top

    ctx = get_ctx()
    address = _listen(listen, once=once, as_json=ctx.json)
    rt = Runtime.make(region=ctx.region, profile=ctx.profile,
                      report=ctx.reporter(ctx.err_console))
    with open_top(name, job_id=job_id, region=ctx.region, profile=ctx.profile,
                  rt=rt) as session:
        try:
            if address is not None:
                _serve(session, address, gpus=gpus, interval=interval,
                       follow=job_id is None)
            else:
                _frames(session, gpus=gpus, once=once, interval=interval or 2.0,
                        as_json=ctx.json)
        except KeyboardInterrupt:
            return


def _listen(listen: str | None, *, once: bool, as_json: bool) -> tuple[str, int] | None:
    """--prometheus's address, checked before any node is dialled."""
    if listen is None:
        return None
    from clusterkit.cluster.jobs.exporter import listen_address
    from clusterkit.errors import UsageError

    if once or as_json:
        raise UsageError(f"--prometheus serves until Ctrl-C: not with "
                         f"{'--once' if once else '--json'}",
                         "run `clusterkit top NAME --once --json` apart for one frame")
    return listen_address(listen)


def _serve(session, address: tuple[str, int], *, gpus: bool, interval: float | None,
           follow: bool) -> None:
    """The exporter: a refresh at the sampler's pace; the live table on a terminal."""
    from rich.live import Live

    from clusterkit.cluster.jobs.exporter import Exporter, serve, url

    ctx = get_ctx()
    spec = session.jc.spec
    pace = interval or (spec.train.sample_interval if spec is not None else 2.0)
    exporter = Exporter(session, follow=follow)
    frame = exporter.refresh()
    server = serve(exporter, *address)
    host, port = server.server_address[:2]
    ctx.err_console.print(f"serving {frame.cluster}'s metrics on {url(str(host), port)} "
                          f"(refreshed every {pace:g} s; Ctrl-C stops)",
                          markup=False, highlight=False)
    stop = _stop_on_signals()  # between two refreshes: never in the middle of one
    try:
        if not sys.stdout.isatty():  # headless: a service, a pipe
            while not stop.wait(pace):
                exporter.refresh()
            return
        with Live(_view(frame, gpus), console=ctx.console, auto_refresh=False) as live:
            while not stop.wait(pace):
                live.update(_view(exporter.refresh(), gpus), refresh=True)
    finally:
        server.shutdown()


def _stop_on_signals() -> threading.Event:
    """An event set by Ctrl-C (SIGINT) or a service manager's SIGTERM: the exporter ends
    after the refresh under way, exit 0."""
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda _signum, _frame: stop.set())
    return stop


def _view(frame: TopFrame, gpus: bool) -> Group:
    from rich.console import Group
    from rich.text import Text

    return Group(table(frame, gpus), *[Text(line) for line in findings_text(frame)])


def _frames(session, *, gpus: bool, once: bool, interval: float, as_json: bool) -> None:
    from rich.live import Live

    ctx = get_ctx()
    if as_json:
        while True:
            print(json.dumps(session.frame().to_json()), flush=True)
            if once:
                return
            time.sleep(interval)
    if once or not sys.stdout.isatty():  # a pipe gets frame after frame, as `top -b`
        while True:
            ctx.console.print(_view(session.frame(), gpus))
            if once:
                return
            time.sleep(interval)
    with Live(_view(session.frame(), gpus), console=ctx.console, auto_refresh=False) as live:
        while True:
            time.sleep(interval)
            live.update(_view(session.frame(), gpus), refresh=True)





@click.command()
@click.argument("name", callback=check_target_argument)
@click.argument("job_id", required=False, metavar="[JOB_ID]")
@json_option
def job(name: str, job_id: str | None) -> None:
    """The cluster's jobs, and a job's report (default: the newest job's).

    Per node and in total: wall time, GPU utilization (mean, p5, p95), the job's mean
    CPU, steady-state samples/s, samples in all, the job's cost at its nodes' launch
    prices beside on-demand, and what each recovery lost. The report is made when the
    job ends and kept on the master.

    \b
    Example:
      clusterkit job sandbox
    """
    from clusterkit.cluster.jobs.report import do_job
    from clusterkit.training.report import lines

    ctx = get_ctx()
    rt = Runtime.make(region=ctx.region, profile=ctx.profile,
                      report=ctx.reporter(ctx.err_console))
    listing = do_job(name, job_id, region=ctx.region, profile=ctx.profile, rt=rt)
    if ctx.json:
        print(json.dumps(listing.to_json()), flush=True)
        return
    for kept in listing.jobs:
        started = "-" if kept.started is None else time.strftime(
            "%Y-%m-%d %H:%M", time.localtime(kept.started))
        mark = "*" if kept.job_id == listing.job_id else " "
        ctx.console.print(f"{mark} {kept.job_id}  {kept.state.value:<12} {started}",
                          markup=False, highlight=False)
    if listing.report is None:
        ctx.console.print(f"job {listing.job_id} has no report yet (it runs: `clusterkit "
                          f"top {name}` shows it now)", markup=False, highlight=False)
        return
    for line in lines(listing.report):
        ctx.console.print(line, markup=False, highlight=False)





@click.command()
@click.argument("spec_file", callback=check_target_argument)
@click.argument("command", nargs=-1)
@click.option("--nodes", "node_counts", required=True, metavar="1,2,4",
              help="Node counts to run on: the first k nodes of the running cluster.")
@click.option("--duration", default="60s", show_default=True, metavar="DURATION",
              help="Steady-state measurement per run, once every node printed a "
                   "throughput (20s, 2m, ...).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, exists=True,
                                                  writable=True), default=".",
              show_default=True, help="Directory for scaling-NAME.csv and scaling-NAME.png.")
@click.option("--workdir", "workdir_option", type=click.Path(file_okay=False, exists=True),
              help="Local directory copied to the nodes before each run (as for train).")
@click.option("--io-only", "input_only", is_flag=True,
              help="The input pipeline alone: every process gets CLUSTERKIT_IO_ONLY=1 "
                   "(read and decode, no training), so the table shows which side limits.")
@click.option("--io-args", default="", metavar="WORDS",
              help="Words added to the command with --io-only, e.g. '--test-io 1' for "
                   "MXNet's image-classification scripts.")
@click.option("--rate-wait", default="5m", show_default=True, metavar="DURATION",
              help="How long a run may go without every node's first throughput line "
                   "before `scaling` fails (a run whose job ends first fails at once).")
@json_option
def scaling(spec_file: str, command: tuple[str, ...], node_counts: str, duration: str,
            out_dir: str, workdir_option: str | None, input_only: bool,
            io_args: str, rate_wait: str) -> None:
    """Run the job on 1, 2, 4, ... nodes and print the scaling table: samples/s, speedup,
    efficiency (% of linear), $ per million samples; a CSV and a PNG chart beside it.

    Each run replaces the cluster's job (nothing is relaunched) and is stopped after
    its measurement. Every node must print its samples/s (MXNet's Speedometer, `N
    samples/s`, or train.throughput_pattern): a run whose job ends first, or that
    prints none within --rate-wait, fails the command.

    \b
    Example:
      clusterkit scaling cluster.yaml --nodes 1,2,4 --duration 60s
    """
    from pathlib import Path

    from clusterkit.cli import charts, scalechart
    from clusterkit.cluster.jobs.scaling import do_scaling
    from clusterkit.errors import UsageError
    from clusterkit.node.autostop_policy import duration_seconds
    from clusterkit.training.scaling import csv_text, lines

    try:
        counts = [int(n) for n in node_counts.split(",")]
        seconds = float(duration_seconds(duration))
        wait = float(duration_seconds(rate_wait))
    except ValueError as exc:
        raise UsageError(f"--nodes {node_counts} / --duration {duration} / --rate-wait "
                         f"{rate_wait}: {exc}",
                         "e.g. --nodes 1,2,4 --duration 60s --rate-wait 5m") from exc
    charts.require()  # the chart is drawn at the end: say now what is missing
    ctx = get_ctx()
    rt = Runtime.make(region=ctx.region, profile=ctx.profile,
                      report=ctx.reporter(ctx.err_console))
    result = do_scaling(spec_file, counts, duration=seconds, command=command,
                        workdir_option=workdir_option, input_only=input_only,
                        io_args=io_args, rate_wait=wait, region=ctx.region,
                        profile=ctx.profile, rt=rt)
    base = Path(out_dir) / f"scaling-{result.cluster}{'-io' if input_only else ''}"
    base.with_suffix(".csv").write_text(csv_text(result.rows))
    title = f"{result.cluster} {'input pipeline' if input_only else 'scaling'}"
    scalechart.write(base.with_suffix(".png"), result.rows, title)
    if ctx.json:
        print(json.dumps({"cluster": result.cluster, "input_only": input_only,
                          "jobs": list(result.jobs),
                          "rows": [r.__dict__ for r in result.rows],
                          "csv": str(base.with_suffix(".csv")),
                          "png": str(base.with_suffix(".png"))}), flush=True)
        return
    if input_only:
        ctx.console.print("the input pipeline alone (CLUSTERKIT_IO_ONLY=1: read and decode, "
                          "no training):", markup=False, highlight=False)
    for line in lines(result.rows):
        ctx.console.print(line, markup=False, highlight=False)
    ctx.console.print(f"wrote {base.with_suffix('.csv')} and {base.with_suffix('.png')}",
                      markup=False, highlight=False)


COMMANDS = [top, job, scaling]
