"""`clusterkit sandbox start|stop|status|interrupt|imds-fault|partition|restart-sshd|
cut-client`: the click group this package adds to clusterkit's CLI (the entry point
``sandbox`` of the group ``clusterkit.commands``, sandbox/pyproject.toml); clusterkit
gives it its global options, as to its own commands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.render import print_json

NODES_HINT = "`clusterkit status CLUSTER` lists the nodes"
DURATIONS_HINT = f"{NODES_HINT}; durations look like 10s or 2m"

DIR_OPTION = click.option(
    "--dir", "directory", envvar="CLUSTERKIT_SANDBOX_DIR", type=click.Path(file_okay=False),
    help="State directory (default ~/.clusterkit/sandbox; also CLUSTERKIT_SANDBOX_DIR).")


@click.group()
def sandbox() -> None:
    """Local AWS endpoint + SSH nodes on loopback, for demos and tests.

    \b
    Example:
      clusterkit sandbox start && clusterkit --sandbox up examples/sandbox-cpu.yaml --yes
    """


@sandbox.command()
@DIR_OPTION
@click.option("--timings", "timings", default=None, metavar="aws[:SCALE]",
              help="Wait as AWS does, scaled by SCALE (default 0.1): each API call's round "
              "trip, an instance's pending -> running and running -> SSH. Off by default; "
              "`sandbox status --json` shows the table in force.")
@json_option
def start(directory: str | None, timings: str | None) -> None:
    """Start the emulator and the node agent in the background.

    \b
    Example:
      clusterkit sandbox start --dir /tmp/ck-sandbox
      clusterkit sandbox start --timings aws:0.1
    """
    from clusterkit.errors import UsageError
    from clusterkit_sandbox.control import do_start
    from clusterkit_sandbox.timings import parse

    try:
        table = parse(timings)
    except ValueError as exc:
        raise UsageError(str(exc), "e.g. --timings aws (AWS's waits x 0.1) or "
                         "--timings aws:1 (AWS's own)") from None
    result = do_start(directory, table)
    _render(result, "already running" if result["already_running"] else "started")


@sandbox.command()
@DIR_OPTION
@json_option
def stop(directory: str | None) -> None:
    """Stop everything the sandbox started and remove its mounts and loop devices.

    \b
    Example:
      clusterkit sandbox stop
    """
    from clusterkit_sandbox.control import do_stop

    result = do_stop(directory)
    if get_ctx().json:
        print_json(result)
        return
    what = "stopped" if result["was_running"] else "was not running"
    get_ctx().console.print(
        f"sandbox {what}; cleaned up: {result['killed']} process(es), "
        f"{result['unmounted']} mount(s), {result['loops_detached']} loop device(s)")


@sandbox.command()
@DIR_OPTION
@click.argument("cluster")
@click.argument("node")
@click.option("--notice", default="2m", show_default=True, metavar="DURATION",
              help="How long before the instance goes (EC2: two minutes).")
@click.option("--rebalance-first", default="0s", show_default=True, metavar="DURATION",
              help="Post a rebalance recommendation first, this long before the notice.")
@click.option("--action", type=click.Choice(["terminate", "stop"]), default="terminate",
              show_default=True, help="What happens to the instance at the notice's time.")
@click.option("--region", default="us-east-1", show_default=True)
@json_option
def interrupt(directory: str | None, cluster: str, node: str, notice: str,
              rebalance_first: str, action: str, region: str) -> None:
    """Post a spot interruption notice in NODE's instance metadata, as EC2 does: the
    node's supervisor sees it within 5 s; the instance goes when the notice says.

    \b
    Example:
      clusterkit sandbox interrupt demo worker-1 --notice 20s
      clusterkit sandbox interrupt demo 2 --rebalance-first 30s
    """
    from clusterkit_sandbox.imds import do_interrupt, duration

    _on_node(lambda: do_interrupt(directory, cluster, node, notice=duration(notice),
                                  rebalance_first=duration(rebalance_first), action=action,
                                  region=region),
             DURATIONS_HINT, lambda result: f"{result['instance_id']} ({node} of {cluster}): "
             f"interruption notice posted, {action} at {result['at']}")


@sandbox.command(name="imds-fault")
@DIR_OPTION
@click.argument("cluster")
@click.argument("node")
@click.option("--for", "length", default="20s", show_default=True, metavar="DURATION",
              help="How long the node's metadata endpoint fails.")
@click.option("--mode", type=click.Choice(["error", "timeout", "mixed"]), default="mixed",
              show_default=True, help="Answer 500, hang past the client's timeout, or both in turn.")
@click.option("--region", default="us-east-1", show_default=True)
@json_option
def imds_fault(directory: str | None, cluster: str, node: str, length: str, mode: str,
               region: str) -> None:
    """Make NODE's instance metadata endpoint fail for a while (500s, timeouts): no
    evidence of a lost node, so no recovery may follow.

    \b
    Example:
      clusterkit sandbox imds-fault demo worker-1 --for 20s
    """
    from clusterkit_sandbox.imds import do_imds_fault, duration

    _on_node(lambda: do_imds_fault(directory, cluster, node, seconds=duration(length),
                                   mode=mode, region=region),
             DURATIONS_HINT, lambda result: f"{result['instance_id']} ({node} of {cluster}): "
             f"metadata fails ({mode}) until {result['until']}")


@sandbox.command()
@DIR_OPTION
@click.argument("cluster")
@click.argument("node")
@click.option("--heal", is_flag=True, help="Let the node answer again.")
@click.option("--region", default="us-east-1", show_default=True)
@json_option
def partition(directory: str | None, cluster: str, node: str, heal: bool,
              region: str) -> None:
    """Make NODE stop answering, as a node cut off by the network does (every process
    of it frozen; its instance keeps running); --heal undoes it.

    \b
    Example:
      clusterkit sandbox partition demo worker-2
    """
    from clusterkit_sandbox.partition import do_partition

    _on_node(lambda: do_partition(directory, cluster, node, heal=heal, region=region),
             NODES_HINT, lambda result: f"{result['instance_id']} ({node} of {cluster}): "
             f"{result['state']} ({result['processes']} process(es))")


@sandbox.command(name="restart-sshd")
@DIR_OPTION
@click.argument("cluster")
@click.argument("node")
@click.option("--down", "length", default="5s", show_default=True, metavar="DURATION",
              help="How long the node refuses SSH connections before its sshd listens again.")
@click.option("--region", default="us-east-1", show_default=True)
@json_option
def restart_sshd(directory: str | None, cluster: str, node: str, length: str,
                 region: str) -> None:
    """Restart NODE's sshd, as `systemctl restart ssh` does: new connections are
    refused for --down, the sessions it started go on (a job's too); returns once it
    listens again. No evidence of a lost node, so no recovery may follow.

    \b
    Example:
      clusterkit sandbox restart-sshd demo worker-1 --down 5s
    """
    from clusterkit_sandbox.imds import duration
    from clusterkit_sandbox.sshdrestart import do_restart_sshd

    _on_node(lambda: do_restart_sshd(directory, cluster, node, down=duration(length),
                                     region=region),
             DURATIONS_HINT, lambda result: f"{result['instance_id']} ({node} of {cluster}): "
             f"sshd restarted, down {result['down_s']:.1f} s")


@sandbox.command(name="cut-client")
@DIR_OPTION
@click.option("--for", "length", default="30s", show_default=True, metavar="DURATION",
              help="How long the connections fail (0s: no longer).")
@json_option
def cut_client(directory: str | None, length: str) -> None:
    """Cut this sandbox's clients off its nodes for a while, as when your own network
    drops: every SSH connection a clusterkit command has or opens to a node fails. The
    nodes go on; no evidence of a lost node, so no recovery may follow.

    \b
    Example:
      clusterkit sandbox cut-client --for 30s
    """
    from clusterkit_sandbox.clientcut import do_cut_client
    from clusterkit_sandbox.imds import duration

    _on_node(lambda: do_cut_client(directory, seconds=duration(length)),
             "durations look like 10s or 2m", lambda result: f"the clients' connections to the "
             f"nodes: {result['state']} until {result['until']}")


@sandbox.command("status")
@DIR_OPTION
@json_option
def status_(directory: str | None) -> None:
    """Endpoint, nodes and their addresses.

    \b
    Example:
      clusterkit sandbox status --json
    """
    from clusterkit_sandbox.control import do_status

    _render(do_status(directory), "")


def _on_node(act: Callable[[], dict[str, Any]], hint: str,
             said: Callable[[dict[str, Any]], str]) -> None:
    """One fault command on a node: ``act`` (a bad node or duration: a usage error with
    ``hint``, exit 2), then its result as JSON or the line ``said`` makes of it."""
    from clusterkit.errors import UsageError

    try:
        result = act()
    except ValueError as exc:
        raise UsageError(str(exc), hint) from None
    if get_ctx().json:
        print_json(result)
    else:
        Console().print(said(result))


def _render(status: dict[str, Any], verb: str) -> None:
    ctx = get_ctx()
    if ctx.json:
        print_json(status)
        return
    render_status(status, ctx.console, verb)


def render_status(status: dict[str, Any], console: Console, verb: str = "") -> None:
    """The sandbox's state for a person: endpoint, how to use it, what it does not
    emulate, and its nodes."""
    if not status["running"]:
        console.print(f"sandbox not running (state dir {status['dir']})")
        return
    head = f"sandbox {verb}: " if verb else "sandbox: "
    console.print(f"{head}AWS endpoint {status['endpoint']} (pid {status['pid']}, "
                  f"state dir {status['dir']})")
    console.print("use it: clusterkit --sandbox ...  or  export CLUSTERKIT_SANDBOX=1")
    for note in status.get("capabilities", {}).get("not_emulated", []):
        console.print(f"[yellow]note:[/yellow] {note}")
    if not status["nodes"]:
        console.print("nodes: none (instances tagged clusterkit:cluster become nodes)")
        return
    table = Table("instance", "cluster", "address", "hostname", "state", box=None)
    for node in status["nodes"]:
        table.add_row(node["instance_id"], node["cluster"], node["address"], node["hostname"],
                      node["state"])
    console.print(table)

