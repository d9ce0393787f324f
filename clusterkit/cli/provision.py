"""`clusterkit plan`, `up`, `status`, `down`: option wiring, and the rendering of their
results (the progress on the way is cli.events')."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.markup import escape

from clusterkit.bootstrap.steps import STEP_NAMES
from clusterkit.cli import upchart
from clusterkit.cli.context import check_target_argument, get_ctx, json_option
from clusterkit.cli.interrupt import reported_interrupt
from clusterkit.cli.remote import accept_option
from clusterkit.cli.render import print_json
from clusterkit.cli.upchart import TIMELINE_OPTION
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, UsageError

if TYPE_CHECKING:
    from clusterkit.bootstrap.run import BootstrapResult
    from clusterkit.cluster.provision.up import UpResult
    from clusterkit.plan.up import UpPlan

TIMEOUT_HELP = "Give up waiting after this many seconds (default 1800)."


def runtime(region: str | None = None) -> Runtime:
    """The AWS session of --region/--profile, reporting progress on the command's console
    (stdout, or stderr under --json)."""
    ctx = get_ctx()
    return Runtime.make(region=region or ctx.region, profile=ctx.profile,
                        report=ctx.reporter(ctx.console))


@click.command()
@click.argument("spec_files", nargs=-1, required=True, metavar="SPEC...",
                type=click.Path(dir_okay=False))
@click.option("--offline", is_flag=True,
              help="No AWS calls: shipped catalog and price snapshot, assumes a new cluster.")
@click.option("--out", "out", type=click.Path(dir_okay=False), default=None,
              help="Save the plan to this file (one SPEC only); `clusterkit up --plan FILE` "
              "applies exactly it, and refuses if the world or the spec changed since.")
@json_option
def plan(spec_files: tuple[str, ...], offline: bool, out: str | None) -> None:
    """Show what `up` would create or change, the chosen offer and total $/h. Read-only.
    The lines are the ones `up` shows before it asks. Several SPECs: one plan after the
    other, each under its file's name (the first that fails stops the command).

    \b
    Example:
      clusterkit plan examples/imagenet-p4d-spot.yaml --offline
      clusterkit plan --offline examples/*.yaml
      clusterkit plan cluster.yaml --out plan.json && clusterkit up --plan plan.json
    """
    from clusterkit.cluster.provision.planning import do_plan

    if out and len(spec_files) > 1:
        raise UsageError(f"--out saves one plan: {len(spec_files)} specs given",
                         "`clusterkit plan SPEC --out FILE`, one spec at a time")
    ctx = get_ctx()
    plans = []
    for spec_file in spec_files:
        result = do_plan(spec_file, offline=offline, profile=ctx.profile,
                         rt=None if offline else runtime(), region=ctx.region, out=out)
        if not ctx.json:
            if plans:
                ctx.console.print()
            render_plan(ctx.console, result, spec_file if len(spec_files) > 1 else None, out)
        plans.append({"file": spec_file, "plan": result.to_json()})
    if ctx.json:
        print_json(plans[0]["plan"] if len(plans) == 1 else {"plans": plans})


def render_plan(console: Console, result: UpPlan, heading: str | None,
                out: str | None) -> None:
    """A plan's lines, under ``heading`` (its spec file, when there are several)."""
    from clusterkit.plan.spend import plan_lines

    if heading is not None:
        console.print(f"[bold]{escape(heading)}[/bold]", highlight=False)
    for line in plan_lines(result):
        console.print(line, highlight=False, markup=False)
    if out:
        console.print(f"saved the plan to {out}: `clusterkit up --plan {out}` applies it",
                      highlight=False, markup=False)


def _terminal() -> bool:
    """Whether there is someone to ask: stdin is a terminal."""
    return sys.stdin.isatty()


def _ask(question: str) -> bool:
    """A yes/no question on the terminal; Ctrl-C or end of input at it means no."""
    try:
        return click.confirm(question, default=False, err=True)
    except click.exceptions.Abort:
        return False


@click.command()
@click.argument("spec_file", type=click.Path(dir_okay=False), required=False)
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None,
              help="Apply this saved plan (`clusterkit plan SPEC --out FILE`) instead of a "
              "SPEC (found beside the plan, or where the plan was made): no question; exit "
              "1 naming each difference if the world changed since, exit 2 if what the spec "
              "says did; a plan already applied changes nothing.")
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@click.option("--no-wait-ssh", is_flag=True, help="Return once the nodes run, without "
              "waiting for SSH.")
@click.option("--no-wait", is_flag=True, help="On a Capacity Block that has not started: "
              "exit 1 with its start time instead of waiting for it.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before spending (needed "
              "without a terminal).")
@click.option("--force-step", "force_steps", multiple=True, type=click.Choice(STEP_NAMES),
              help="Run this bootstrap step again on every node, whatever its receipt "
              "says (repeatable).")
@click.option("--no-bootstrap", is_flag=True, help="Stop once SSH answers: leave the "
              "nodes as they are (no hosts file, scratch, EFS or environment).")
@click.option("--autostop", "autostop", default=None, metavar="DURATION|off",
              help="Shut the nodes down after this long idle (no job, no SSH session with a "
              "terminal), e.g. 30m; replaces the spec's `autostop` (off: none).")
@accept_option
@TIMELINE_OPTION
@json_option
def up(spec_file: str | None, plan_file: str | None, timeout: float, no_wait_ssh: bool,
       no_wait: bool, yes: bool, force_steps: tuple[str, ...], no_bootstrap: bool, autostop: str | None,
       accept_host_keys: tuple[str, ...], timeline: str | None) -> None:
    """Provision the cluster, wait for SSH, bootstrap every node. Idempotent: a second run
    changes nothing.

    Bootstrap runs, on every node at once: hostname, hosts (/etc/hosts with the
    deeplearning-master/-workerN names), ssh (pinned host keys, node-to-node SSH), scratch
    (RAID-0 instance store), efs, env (train.packages); a step whose receipt on the node
    matches (and whose result the system shows) is not run again.

    Shows what it will create and what that costs, then asks (--yes skips the question;
    with no terminal and no --yes it refuses). What it shows is what `clusterkit plan`
    prints; if the cluster changes while you read, it stops without changing anything.
    A changed node count is applied; a changed instance type, market, region or image is
    refused (`down` first). With nodes.capacity_reservation the nodes launch into it;
    a Capacity Block that has not started is waited for (--no-wait: exit 1).

    \b
    Example:
      clusterkit --sandbox up examples/sandbox-cpu.yaml --yes
      clusterkit up --plan plan.json
      clusterkit up cluster.yaml --timeline up.png
      clusterkit up cluster.yaml --autostop 30m
    """
    from clusterkit.cluster.provision.up import do_up

    ctx = get_ctx()
    upchart.check_path(timeline)
    ask = _ask if _terminal() else None
    with reported_interrupt():  # a second Ctrl-C cannot cut off what still runs
        result = do_up(spec_file, rt=runtime(), timeout=timeout, wait_ssh=not no_wait_ssh,
                       yes=yes or ctx.yes, confirm=ask, region=ctx.region,
                       accept_host_keys=accept_host_keys, bootstrap=not no_bootstrap,
                       force_steps=force_steps, plan_file=plan_file, autostop=autostop,
                       wait_start=not no_wait)
    render_up(ctx.console, result)
    if timeline:
        upchart.draw(ctx.console, result.cluster, timeline)
    if ctx.json:
        print_json(result.to_json())


def render_up(console: Console, result: UpResult) -> None:
    """The cluster as `up` left it: one line per node, and the ssh command that reaches
    the master (checking the host keys `up` recorded, when it probed them)."""
    cost = f"${result.hourly_usd:.4f}/h" if result.hourly_usd is not None else "$/h unknown"
    console.print(f"[bold green]cluster {result.cluster} is up[/bold green]: "
                  f"{len(result.nodes)} node(s) in {result.region}, {cost}", highlight=False)
    for n in result.nodes:
        console.print(f"  {n.index!s:>3} {n.role:<6} {n.instance_id} {n.type} {n.market} "
                      f"{n.az} {n.ssh_address or '-'}", markup=False, highlight=False)
    if not result.nodes:
        return
    if result.bootstrap is not None:
        render_bootstrap(console, result.bootstrap)
    if result.autostop is not None and result.autostop.clock is not None:
        console.print(result.autostop.clock.describe(), markup=False, highlight=False)
    master = result.nodes[0].ssh_address or "<master address>"
    port = "" if result.ssh_port == 22 else f" -p {result.ssh_port}"
    if result.known_hosts:
        console.print(f"reach it: [bold]ssh -A{port} -o UserKnownHostsFile="
                      f"{result.known_hosts} {result.ssh_user}@{master}[/bold]  (host keys "
                      "recorded on first contact)", highlight=False)
    else:
        console.print(f"reach it: [bold]ssh -A{port} {result.ssh_user}@{master}[/bold]",
                      highlight=False)
    render_ssh_hosts(console, result)


def render_ssh_hosts(console: Console, result: UpResult) -> None:
    """``ssh NAME`` and ``ssh NAME-worker-1`` through the cluster's host entries, and the
    Include line ~/.ssh/config still needs for them (clusterkit never edits it)."""
    if result.ssh_hosts is None:
        return
    names = [f"ssh {result.cluster}"] + ([f"ssh {result.cluster}-worker-1"]
                                         if len(result.nodes) > 1 else [])
    from rich.markup import escape

    console.print(f"or by name: [bold]{'[/bold], [bold]'.join(names)}[/bold] (host entries "
                  f"in {escape(str(result.ssh_hosts))})", highlight=False, soft_wrap=True)
    if result.ssh_include:
        console.print(f"  for that, add once at the top of ~/.ssh/config: "
                      f"[bold]{escape(result.ssh_include)}[/bold]", highlight=False,
                      soft_wrap=True)


def bootstrap_lines(result: BootstrapResult) -> list[str]:
    """One line per step: on how many nodes it ran, was already done or was skipped (with
    the reasons), failed or did not run."""
    from clusterkit.bootstrap.run import Outcome

    lines = []
    for step, counts in result.by_step().items():
        parts = []
        for outcome in Outcome:
            if counts[outcome]:
                why = ""
                if outcome in (Outcome.SKIPPED, Outcome.FAILED):
                    why = f" ({'; '.join(result.reasons(step, outcome))})"
                parts.append(f"{outcome.value} on {counts[outcome]}{why}")
        lines.append(f"  {step:<9} " + (", ".join(parts) or "-"))
    return lines


def render_bootstrap(console: Console, result: BootstrapResult) -> None:
    ready = "every node bootstrapped" if result.ok else \
        f"bootstrap failed on {len(result.failed)} node(s)"
    console.print(f"{ready} ({len(result.nodes)} node(s), {result.bodies_run} step run(s)):",
                  markup=False, highlight=False)
    for line in bootstrap_lines(result):
        console.print(line, markup=False, highlight=False)


@click.command()
@click.argument("name", required=False, callback=check_target_argument)
@click.option("--wide", is_flag=True, help="Every column (instance id, addresses, region).")
@TIMELINE_OPTION
@json_option
def status(name: str | None, wide: bool, timeline: str | None) -> None:
    """Nodes, roles, AZ, market, addresses, state and cost so far (found by tags).

    NAME is a cluster name (looked up in --region) or a spec file (its regions); without
    NAME every clusterkit cluster in --region is listed.

    \b
    Example:
      clusterkit status sandbox --wide
      clusterkit status sandbox --timeline up.png   # the last `up`, drawn
    """
    from clusterkit.cli.status_view import render_status
    from clusterkit.cluster.ops.status import do_status

    ctx = get_ctx()
    if timeline:  # the record of the last `up` on this machine: no AWS call
        if not name:
            raise UsageError("--timeline needs the cluster's NAME (or spec file)",
                             "`clusterkit status NAME --timeline FILE.png`")
        upchart.check_path(timeline)
        from clusterkit.cluster.access.target import open_cluster

        upchart.draw(ctx.console, open_cluster(name).name or name, timeline)
        return
    result = do_status(name, region=ctx.region, rt=runtime())
    if name and not result.nodes and result.remains is None:  # not found: exit 1
        raise ClusterkitError(f"no cluster {result.cluster or name} in "
                              f"{', '.join(result.regions)}",
                              "check the name and --region; `clusterkit status` lists "
                              "every cluster")
    if ctx.json:
        print_json(result.to_json())
    else:
        render_status(ctx.console, result, wide=wide)


@click.command()
@click.argument("target", metavar="SPEC|NAME", required=False, callback=check_target_argument)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@click.option("--delete-efs", is_flag=True, help="Also delete the EFS file systems the "
              "cluster keeps (deletion_policy: retain), after confirmation.")
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Save the plan to this file and delete nothing; `clusterkit down "
              "--plan FILE` applies it.")
@click.option("--plan", "plan_file", type=click.Path(dir_okay=False), default=None,
              help="Apply a plan saved by `down --out` (no SPEC|NAME): exactly what it "
              "deletes, refused if the cluster changed since (exit 1) or another "
              "clusterkit version wrote it (exit 2).")
@json_option
def down(target: str | None, yes: bool, timeout: float, delete_efs: bool, out: str | None,
         plan_file: str | None) -> None:
    """Delete everything the cluster owns (by spec file or NAME); nothing orphaned.

    The cluster is found through its local record (written by `up`), else by a tag
    search of every enabled region; --region narrows the search. Declining the question
    exits 1 with nothing deleted.

    \b
    Example:
      clusterkit down examples/sandbox-cpu.yaml --yes
      clusterkit down demo --out down.json && clusterkit down --plan down.json
    """
    from clusterkit.cluster.provision.down import do_down

    ctx = get_ctx()
    result = do_down(target, yes=yes or ctx.yes, region=ctx.region, rt=runtime(),
                     confirm=_ask if _terminal() else None, timeout=timeout,
                     delete_efs=delete_efs, out=out, plan_file=plan_file)
    if ctx.json:
        print_json(result.to_json())


COMMANDS = [plan, up, status, down]
