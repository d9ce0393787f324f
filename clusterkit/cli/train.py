"""`clusterkit train`, `logs`, `stop`: option wiring and rendering only."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from clusterkit.cli.context import (
    check_spec_argument,
    check_target_argument,
    get_ctx,
    json_option,
)
from clusterkit.cli.render import print_json
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.training.sizes import lines as size_lines

if TYPE_CHECKING:  # the job layer imports paramiko: loaded by the commands that use it
    from clusterkit.cluster.jobs.afterjob import AfterJob
    from clusterkit.cluster.jobs.nccltest import NcclTest
    from clusterkit.cluster.jobs.results import JobOutcome, StopResult
    from clusterkit.node.jobstate import ProcessState

JOB_HELP = "The job id (default: the cluster's newest job)."


def _runtime() -> Runtime:
    """Progress and warnings on stderr: the job's logs own stdout."""
    ctx = get_ctx()
    return Runtime.make(region=ctx.region, profile=ctx.profile,
                        report=ctx.reporter(ctx.err_console))


def _confirm_stop(job_id: str) -> bool:
    """Ctrl-C during `train`: stop the job? Default yes; no terminal: yes."""
    if not sys.stdin.isatty():
        return True
    try:
        return click.confirm(f"\nstop job {job_id}?", default=True, err=True)
    except click.Abort:  # a second Ctrl-C
        return True


def _finish(outcome: JobOutcome, down: Callable[[], AfterJob] | None = None) -> None:
    """Print the outcome; then ``down`` (`train --down`: after the report, so a teardown
    never hides it); a failed job exits 1 naming node, role and its last lines."""
    ctx = get_ctx()
    if not ctx.json:
        _show(outcome)
    after = down() if down is not None else None
    if ctx.json:
        print_json({**outcome.to_json(), **({"down": after.to_json()} if after else {})})
        if not outcome.ok:
            sys.exit(1)
        return
    error = _failure(outcome)
    if error is not None:
        raise error


def _show(outcome: JobOutcome) -> None:
    """The recoveries, the report, and how the job ended (a failure's last lines)."""
    err = get_ctx().err_console
    for recovery in outcome.recoveries:
        err.print(recovery.describe(), markup=False, highlight=False)
    final = outcome.final
    if final is not None:  # an elastic job's size over time
        for line in size_lines(final.sizes, final.updated or time.time(), running=False):
            err.print(line, markup=False, highlight=False)
    if outcome.report is not None:
        from clusterkit.training.report import lines

        for line in lines(outcome.report):
            err.print(line, markup=False, highlight=False)
    if outcome.detached:
        err.print(f"job {outcome.job_id} {outcome.state} on cluster {outcome.cluster}; "
                  f"follow it: clusterkit logs {outcome.cluster} -f; stop it: "
                  f"clusterkit stop {outcome.cluster}", markup=False, highlight=False)
        click.echo(outcome.job_id)
        return
    if outcome.ok:
        err.print(f"[green]job {outcome.job_id} succeeded[/green]", highlight=False)
        return
    failed = outcome.failed
    if failed is not None:
        if failed.tail:
            err.print(f"last lines of {failed.node}/{failed.process}:", markup=False,
                      highlight=False)
        for line in failed.tail:
            err.print(f"  {line}", markup=False, highlight=False)
        for other in outcome.others:
            err.print(f"also: {other.describe()}", markup=False, highlight=False)


def _failure(outcome: JobOutcome) -> ClusterkitError | None:
    """The error a job that did not succeed exits with (None: it succeeded or runs on)."""
    if outcome.detached or outcome.ok:
        return None
    failed = outcome.failed
    what = failed.describe() if failed is not None else outcome.reason or outcome.state.value
    return ClusterkitError(f"job {outcome.job_id} {outcome.state}: {what}",
                           f"`clusterkit logs {outcome.cluster} --node {failed.node}` shows "
                           "its whole log" if failed else
                           f"`clusterkit logs {outcome.cluster}` shows every log")


def _byte_size(_ctx: click.Context, _param: click.Parameter, value: str | None) -> int | None:
    """``4194304``, ``64K``, ``256M``, ``1G`` (binary multiples; a trailing B or iB is
    allowed) -> bytes."""
    if value is None:
        return None
    text = value.strip().upper().removesuffix("IB").removesuffix("B")
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
    digits = text[:-1] if scale > 1 else text
    if not digits.isdigit():
        raise click.BadParameter(f"{value!r}: bytes, or a number with K, M or G (e.g. 1G)")
    return int(digits) * scale


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False), callback=check_spec_argument)
@click.argument("command", nargs=-1)
@click.option("--detach", "-d", is_flag=True,
              help="Return once every node's supervisor has started (prints the job id); "
                   "with recoveries allowed, a controller left on the master recovers it.")
@click.option("--replace", is_flag=True, help="Stop the job running on the cluster first.")
@click.option("--workdir", "workdir_option", type=click.Path(file_okay=False, exists=True),
              help="Local directory copied to the nodes (EFS, else every node) before the "
                   "start; the command runs there. Default: train.workdir when relative.")
@click.option("--attach", is_flag=True,
              help="Take over the cluster's running job (from any terminal): follow it "
                   "and recover it when it loses nodes, as the `train` that started it.")
@click.option("--max-recoveries", type=click.IntRange(0, 100), default=None,
              help="Times a lost node (spot notice, instance gone, silent for "
                   "train.node_timeout) is replaced and the job restarted from its "
                   "checkpoint (default: train.max_recoveries, 0).")
@click.option("--max-cost", type=click.FloatRange(min=0, min_open=True, max=1_000_000),
              default=None, metavar="DOLLARS",
              help="The job's spending cap: every node it uses (standbys and replacements "
                   "too) at its launch price; before the cap the job gets the checkpoint "
                   "signal and stops as `budget` (default: train.max_cost, none).")
@click.option("--preflight", is_flag=True,
              help="Check every node first (GPUs, DCGM, EFA, the dataset's read rate, an "
                   "all-reduce); a failing node is replaced while recoveries are left, "
                   "else nothing starts (exit 1). Default: train.preflight.")
@click.option("--nccl-test", is_flag=True,
              help="Instead of the job: an all-reduce bandwidth test across every node "
                   "(torchrun, train.python's torch; nccl on GPUs, gloo on CPUs); prints "
                   "the bus bandwidth per size against the type's nominal figure.")
@click.option("--nccl-max-bytes", callback=_byte_size, metavar="SIZE", default=None,
              help="--nccl-test's largest message: bytes, or K/M/G (binary) "
                   "(default 256M on GPUs, 4M on CPUs).")
@click.option("--down", "down_when", flag_value="success", default=None,
              help="When the job succeeds, take the cluster down (as `down`, after the "
                   "job's report); a failed or stopped job leaves it up to look at.")
@click.option("--down-always", "down_when", flag_value="always",
              help="When the job ends, however it ends, take the cluster down.")
@click.option("--yes", "-y", is_flag=True,
              help="With --down/--down-always: do not ask before deleting (needed "
                   "without a terminal).")
@json_option
def train(spec_file: str, command: tuple[str, ...], detach: bool, replace: bool,
          workdir_option: str | None, attach: bool, max_recoveries: int | None,
          max_cost: float | None, preflight: bool, nccl_test: bool, nccl_max_bytes: int | None,
          down_when: str | None, yes: bool) -> None:
    """Start the distributed job (MXNet PS or torchrun) on every node; live logs; fail-fast.

    \b
      clusterkit train SPEC [--detach] [--replace] [--workdir DIR] [--max-recoveries N]
                       [--max-cost DOLLARS] [--preflight] [-- COMMAND ...]
      clusterkit train SPEC --attach [--max-recoveries N] [--workdir DIR]
      clusterkit train SPEC --nccl-test [--nccl-max-bytes SIZE] [--replace]
      clusterkit train SPEC --down|--down-always [--yes] [-- COMMAND ...]
    Example:
      clusterkit train examples/sandbox-cpu.yaml --replace

    Exit 0 when every worker exited 0, 1 when the job failed (the failed node and role
    and the last lines of its log are shown). Ctrl-C asks whether to stop the job. With
    recoveries allowed, a job that loses nodes gets them replaced (only those) and is
    started again; each recovery is printed and kept in the job's record.

    --down takes the cluster down once the job succeeded (--down-always: once it ended,
    failed or stopped too), after its report, exactly as `clusterkit down SPEC` does:
    it asks first (--yes skips; without a terminal --yes is required, checked before the
    job starts); declining exits 1 with nothing deleted. Not with --detach: nothing
    follows a detached job to its end (`clusterkit autostop NAME 30m` does that)."""
    from clusterkit.cluster.jobs.train import do_train

    ctx = get_ctx()
    if nccl_test or nccl_max_bytes is not None:
        _nccl_test(spec_file, bool(command or detach or attach or workdir_option or
                                   max_recoveries is not None or down_when or preflight
                                   or max_cost is not None),
                   nccl_test,
                   replace, nccl_max_bytes)
        return
    down = _down_after(spec_file, down_when, detach, yes or ctx.yes)
    if attach and preflight:
        from clusterkit.errors import UsageError

        raise UsageError("--preflight checks the nodes before a job starts; --attach "
                         "takes over one that runs", f"clusterkit train {spec_file} --attach")
    if attach and max_cost is not None:
        from clusterkit.errors import UsageError

        raise UsageError("--max-cost sets a new job's cap; --attach keeps the cap the job "
                         "started with", f"clusterkit train {spec_file} --attach")
    if attach:
        taken = _attach(spec_file, command, detach, replace, workdir_option, max_recoveries)
        _finish(taken, None if down is None else lambda: down(taken))
        return
    outcome = do_train(spec_file, command=command, workdir_option=workdir_option,
                       detach=detach, replace=replace,
                       out=sys.stderr if ctx.json else sys.stdout,
                       confirm_stop=_confirm_stop, region=ctx.region, profile=ctx.profile,
                       max_recoveries=max_recoveries, preflight=preflight,
                       max_cost=max_cost, rt=_runtime())
    _finish(outcome, None if down is None else lambda: down(outcome))


def _down_after(spec_file: str, when: str | None, detach: bool,
                yes: bool) -> Callable[[JobOutcome], AfterJob] | None:
    """`--down`/`--down-always` checked before anything runs (exit 2: with --detach, or
    with no terminal to ask on and no --yes), as the `down` to run after the job."""
    if when is None:
        return None
    from clusterkit.cli.provision import _ask
    from clusterkit.cluster.jobs.afterjob import DownWhen, down_after
    from clusterkit.errors import UsageError

    flag = "--down" if when == "success" else "--down-always"
    if detach:
        raise UsageError(f"{flag} takes the cluster down when the job ends, and nothing "
                         "follows a detached job to its end",
                         f"run without --detach, or let the idle cluster stop itself: "
                         f"`clusterkit autostop {spec_file} 30m`")
    terminal = sys.stdin.isatty()
    if not (yes or terminal):
        raise UsageError(f"{flag} would delete the cluster when the job ends and there is "
                         "no terminal to ask on then: nothing started",
                         f"pass --yes to take it down without asking (`clusterkit train "
                         f"{spec_file} {flag} --yes`)")
    ctx = get_ctx()
    return lambda outcome: down_after(_runtime(), spec_file, outcome, DownWhen(when),
                                      yes=yes, confirm=_ask if terminal else None,
                                      region=ctx.region)


def _nccl_test(spec_file: str, other_options: bool, nccl_test: bool, replace: bool,
               max_bytes: int | None) -> None:
    from clusterkit.cluster.jobs.nccltest import do_nccl_test
    from clusterkit.errors import UsageError

    if not nccl_test:
        raise UsageError("--nccl-max-bytes goes with --nccl-test",
                         f"clusterkit train {spec_file} --nccl-test --nccl-max-bytes 1G")
    if other_options:
        raise UsageError("--nccl-test runs the bandwidth test instead of the job: it takes "
                         "no COMMAND, --detach, --attach, --workdir, --max-recoveries, "
                         "--max-cost, --preflight or --down",
                         f"clusterkit train {spec_file} --nccl-test")
    ctx = get_ctx()
    found = do_nccl_test(spec_file, max_bytes=max_bytes, replace=replace,
                         out=sys.stderr if ctx.json else sys.stdout, region=ctx.region,
                         profile=ctx.profile, rt=_runtime())
    if not found.outcome.ok:
        _finish(found.outcome)  # raises: the failed node, role and its last lines
    if ctx.json:
        print_json(found.to_json())
        return
    for line in nccl_test_lines(found):
        ctx.console.print(line, markup=False, highlight=False)


def size_words(size: int) -> str:
    """``8 B``, ``64 KiB``, ``256 MiB``, ``1 GiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


def nccl_test_lines(found: NcclTest) -> list[str]:
    """Per size the bus bandwidth, then the peak, the nominal figure, the verdict."""
    result, verdict = found.result, found.verdict
    ranks = f", {len(result.ranks)} rank(s)" if result.ranks else ""
    lines = [f"all-reduce test: {found.nodes} x {found.instance_type}{ranks}, float32 sum",
             f"{'size':>10}  {'bus bandwidth':>14}"]
    lines += [f"{size_words(r.size_bytes):>10}  " +
              (f"{r.busbw_gbs:>9.2f} GB/s" if r.busbw_gbs is not None else f"{'-':>14}")
              for r in result.rows]
    peak = result.peak_row
    if peak is not None and peak.busbw_gbs is not None:
        lines.append(f"peak: {peak.busbw_gbs:.2f} GB/s at {size_words(peak.size_bytes)}")
    network = "EFA" if found.efa else "network, no EFA"
    lines.append(f"nominal: {verdict.nominal_gbs:.2f} GB/s ({found.nominal_gbps:g} Gbit/s, "
                 f"{found.instance_type} {network})")
    lines.append(f"verdict: {verdict.summary}")
    return lines


def _attach(spec_file: str, command: tuple[str, ...], detach: bool, replace: bool,
            workdir_option: str | None, max_recoveries: int | None) -> JobOutcome:
    from clusterkit.cluster.jobs.attach import do_attach
    from clusterkit.errors import UsageError

    if command or detach or replace:
        raise UsageError("--attach takes over the running job: it starts nothing, so it "
                         "takes no COMMAND, --detach or --replace",
                         f"clusterkit train {spec_file} --attach")
    ctx = get_ctx()
    return do_attach(spec_file, workdir_option=workdir_option,
                     out=sys.stderr if ctx.json else sys.stdout, confirm_stop=_confirm_stop,
                     region=ctx.region, profile=ctx.profile, max_recoveries=max_recoveries,
                     rt=_runtime())


@click.command()
@click.argument("name", callback=check_target_argument)
@click.option("--follow", "-f", is_flag=True, help="Keep following until the job ends.")
@click.option("--node", "-n", "nodes", multiple=True, metavar="NODE",
              help="Only this node (index, master, worker-2, ...). Repeatable.")
@click.option("--role", "roles", multiple=True,
              type=click.Choice(["scheduler", "server", "worker", "torchrun"]),
              help="Only processes of this role. Repeatable.")
@click.option("--job", "job_id", metavar="JOB", help=JOB_HELP)
@json_option
def logs(name: str, follow: bool, nodes: tuple[str, ...], roles: tuple[str, ...],
         job_id: str | None) -> None:
    """Print (-f: follow) the job's logs on all nodes, from any terminal.

    Lines are prefixed [node/process]. With -f, exit 0 when the job succeeded, 1 when it
    failed or was stopped.

    \b
    Example:
      clusterkit logs sandbox -f --role worker
    """
    from clusterkit.cluster.jobs.nodejobs import do_logs

    ctx = get_ctx()
    outcome = do_logs(name, job_id=job_id, follow=follow, nodes=nodes, roles=roles,
                      out=sys.stderr if ctx.json else sys.stdout, region=ctx.region,
                      profile=ctx.profile, rt=_runtime())
    if follow or ctx.json:
        _finish(outcome)


def process_words(process: ProcessState) -> str:
    """``worker-0 (exited 3)``: a process and how it stands."""
    exit_code = "" if process.exit is None else f" {process.exit}"
    return f"{process.name} ({process.state or 'unknown'}{exit_code})"


def _render_stop(result: StopResult) -> None:
    ctx = get_ctx()
    if ctx.json:
        print_json(result.to_json())
        return
    if result.already is not None:
        ctx.err_console.print(result.describe_already(), markup=False, highlight=False)
        return
    for node, answer in result.nodes.items():
        state = answer.state
        if state is None or not state.processes:
            said = answer.message if state is None else state.state.value
            ctx.console.print(f"{node}: {said}", markup=False, highlight=False)
            continue
        listed = ", ".join(process_words(p) for p in state.processes)
        ctx.console.print(f"{node}: {state.state}: {listed}", markup=False, highlight=False)
    ctx.err_console.print(f"[green]job {result.job_id} stopped on {len(result.nodes)} "
                          "node(s)[/green]", highlight=False)


@click.command()
@click.argument("name", callback=check_target_argument)
@click.option("--job", "job_id", metavar="JOB", help=JOB_HELP)
@click.option("--grace", type=click.FloatRange(0, 600), default=None,
              help="Seconds between SIGTERM and the kill (default: the job's, 10).")
@json_option
def stop(name: str, job_id: str | None, grace: float | None) -> None:
    """Stop the running job on all nodes: SIGTERM, then its cgroup killed (nothing of it
    survives, setsid or not). A job that already ended is said so (exit 0).

    \b
    Example:
      clusterkit stop sandbox --grace 30
    """
    from clusterkit.cluster.jobs.nodejobs import do_stop

    ctx = get_ctx()
    _render_stop(do_stop(name, job_id=job_id, grace=grace, region=ctx.region,
                         profile=ctx.profile, rt=_runtime()))


COMMANDS = [train, logs, stop]


@click.command("recovery-controller", hidden=True)
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
def recovery_controller(directory: str) -> None:
    """The master's recovery controller (started by `train --detach` with recoveries
    allowed; cluster/jobs/controller.py): follows the job and recovers it."""
    from rich.console import Console

    from clusterkit.cli.events import ConsoleReporter
    from clusterkit.cluster.jobs.controller_daemon import run

    reporter = ConsoleReporter(Console(stderr=True, no_color=True, width=200))
    try:
        outcome = run(directory, reporter)
    except ClusterkitError as exc:
        reporter.close()
        print(f"error: {exc.message}\nhint: {exc.hint}", file=sys.stderr, flush=True)
        sys.exit(exc.exit_code)
    reporter.close()
    sys.exit(0 if outcome.ok else 1)
