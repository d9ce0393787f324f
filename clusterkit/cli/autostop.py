"""`clusterkit autostop NAME DURATION|off`: option wiring and rendering."""

from __future__ import annotations

import re

import click

from clusterkit.cli.context import check_target_argument, get_ctx, json_option
from clusterkit.cli.provision import runtime
from clusterkit.cli.render import print_json


class DurationCommand(click.Command):
    """A negative DURATION (``-5m``) is refused as a duration (exit 2, the forms it
    takes), not as click's unknown option ``-5``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        words = list(args)  # click's parser consumes ``args``
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            given = next((a for a in words if re.fullmatch(r"-[0-9][^ ]*", a)
                          and a.startswith(exc.option_name)), None)
            if given is not None:
                from clusterkit.cluster.ops.autostop import parse_setting

                parse_setting(given, None)  # UsageError: not a duration
            raise


@click.command(cls=DurationCommand)
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
    the rest. `off` removes the watchdogs (on a cluster that autostopped: nothing to do,
    and `up SPEC --autostop off` brings it back without one). DURATION: 20s, 30m, 2h,
    1h30m (10s to 30d).

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
    if result.remains is not None:  # no node runs
        for line in result.idle_lines():
            ctx.console.print(line, markup=False, highlight=False)
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
