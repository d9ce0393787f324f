"""`clusterkit capacity-blocks`: option wiring, the offerings table, and what a purchase
prints (the new reservation and the spec lines that use it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.console import Console
from rich.table import Table

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.provision import runtime
from clusterkit.cli.render import print_json
from clusterkit.plan.reservation import utc

if TYPE_CHECKING:
    from clusterkit.cluster.ops.capacity import BlocksResult


def offerings_table(result: BlocksResult) -> Table:
    table = Table(title=f"Capacity Block offerings: {result.count} x {result.instance_type} "
                        f"for {result.hours} h in {result.region}, cheapest first")
    for name in ("row", "offering", "AZ", "start", "end", "hours", "upfront", "currency"):
        table.add_column(name, no_wrap=True,
                         justify="right" if name in ("row", "hours", "upfront") else "left")
    for row, o in enumerate(result.offerings, start=1):
        table.add_row(str(row), o.offering_id, o.az, utc(o.start), utc(o.end), str(o.hours),
                      "-" if o.fee is None else f"{o.fee:,.2f}", o.currency)
    return table


def render_blocks(console: Console, result: BlocksResult, argv: str) -> None:
    say = lambda text: console.print(text, markup=False, highlight=False)  # noqa: E731
    if result.bought is not None and result.offering is not None:
        say(f"bought capacity block {result.bought.reservation_id}: "
            f"{result.offering.describe()}; it is {result.bought.state}")
        say("use it in the cluster spec:")
        for line in result.spec_lines:
            say(f"  {line}")
        say("`clusterkit up` waits for its start; `clusterkit down` never cancels it")
        return
    if not result.offerings:
        say(f"no Capacity Block offerings for {result.count} x {result.instance_type} for "
            f"{result.hours} h in {result.region}: try another --duration, --start-after, "
            "--count or --region")
        return
    console.print(offerings_table(result))
    say(f"buy one (asks first, paid upfront): clusterkit capacity-blocks {argv} --buy ROW "
        "(a row number, or an offering id)")


@click.command("capacity-blocks")
@click.option("--type", "instance_type", required=True, metavar="TYPE",
              help="Instance type of the block, e.g. p5.48xlarge.")
@click.option("--count", type=click.IntRange(min=1), required=True,
              help="Instances in the block.")
@click.option("--duration", required=True, metavar="DURATION",
              help="How long: 24h, 48h, 7d (whole days; AWS sells 1-14 days, then weeks).")
@click.option("--start-after", "after", metavar="DATE", default=None,
              help="Earliest start, e.g. 2026-03-01 or 2026-03-01T11:30 (UTC).")
@click.option("--buy", metavar="ROW|OFFERING", default=None,
              help="Buy this offering: its row in the list (1 = cheapest) or its id; "
              "asks first, stating the price (--yes skips the question).")
@click.option("--yes", "-y", is_flag=True, help="Buy without asking (needed without a "
              "terminal).")
@json_option
def capacity_blocks(instance_type: str, count: int, duration: str, after: str | None,
                    buy: str | None, yes: bool) -> None:
    """Capacity Blocks for ML: list the offerings (AZ, start, end, upfront price), cheapest
    first, and buy one after confirmation. A bought block is used with `market:
    capacity-block` and its `capacity_reservation` id (the lines are printed).

    \b
    Example:
      clusterkit capacity-blocks --type p5.48xlarge --count 2 --duration 24h
      clusterkit capacity-blocks --type p5.48xlarge --count 2 --duration 24h --buy 1
    """
    from clusterkit.cli.provision import _ask, _terminal
    from clusterkit.cluster.ops.capacity import do_capacity_blocks

    ctx = get_ctx()
    result = do_capacity_blocks(
        instance_type=instance_type, count=count, duration=duration, after=after, buy=buy,
        region=ctx.region, profile=ctx.profile, yes=yes or ctx.yes,
        confirm=_ask if _terminal() else None, rt=runtime())
    if ctx.json:
        print_json(result.to_json())
        return
    argv = f"--type {instance_type} --count {count} --duration {duration}" + (
        f" --start-after {after}" if after else "")
    render_blocks(ctx.console, result, argv)


COMMANDS = [capacity_blocks]
