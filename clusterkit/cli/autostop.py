"""`clusterkit autostop NAME DURATION|off`: option wiring and rendering."""

from __future__ import annotations

import click

from clusterkit.cli.context import check_target_argument, get_ctx, json_option
from clusterkit.cli.provision import runtime
from clusterkit.cli.render import print_json


@click.command()
@click.argument("name", callback=check_target_argument)
@click.argument("duration", metavar="DURATION|off")
@click.option("--action", type=click.Choice(["terminate", "stop"]), default=None,
              help="What the idle nodes do (default: the spec's, else what the cluster runs "
              "now, else terminate). Spot nodes always terminate.")
@json_option
def autostop(name: str, duration: str, action: str | None) -> None:
    """Shut the cluster down after DURATION idle: no job running and no SSH session with
    a terminal open on any node. A watchdog on every node keeps the clock; once idle, the
    workers shut down, then the master; each instance then terminates (or stops) as EC2's
    shutdown behaviour says. The stack and EFS stay: `up` brings it back, `down` removes
    the rest. `off` removes the watchdogs.

    \b
    Example:
      clusterkit autostop demo 30m
      clusterkit autostop demo 2h --action stop
      clusterkit autostop demo off
    """
    from clusterkit.cluster.ops.autostop import do_autostop

    ctx = get_ctx()
    result = do_autostop(name, duration, action=action, region=ctx.region,
                         profile=ctx.profile, rt=runtime())
    if ctx.json:
        print_json(result.to_json())
        return
    ctx.console.print(result.describe(), markup=False, highlight=False)
    for label, what in result.nodes.items():
        ctx.console.print(f"  {label}: {what}", markup=False, highlight=False)
    if result.behaviour_changed:
        ctx.console.print(f"  on shutdown: {result.setting.action} now for "
                          + ", ".join(result.behaviour_changed), markup=False,
                          highlight=False)
    if result.clock is not None:
        ctx.console.print(result.clock.describe(), markup=False, highlight=False)


COMMANDS = [autostop]
