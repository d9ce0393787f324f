"""`clusterkit spot`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

from clusterkit.catalog.ranking import Offer
from clusterkit.catalog.report import SpotReport
from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.render import print_json


def _split(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


@contextmanager
def _progress(console: Console) -> Iterator[Callable[[int, int, str], None]]:
    with Progress(TextColumn("[dim]searching offers[/dim]"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), console=console, transient=True) as bar:
        task = bar.add_task("", total=None)

        def update(done: int, total: int, what: str) -> None:
            bar.update(task, completed=done, total=total, description=what)

        yield update


def _money(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _per_unit(offer: Offer) -> str:
    """What the offer is ranked by: $ per GPU-hour, or per vCPU-hour for a type without
    GPUs ("-": neither is known)."""
    value, unit = offer.unit_cost
    return "-" if value is None or unit == "node" else f"{value:.4f}/{unit}"


def report_table(report: SpotReport) -> Table:
    source = "Pricing API" if report.on_demand_source == "pricing-api" else "shipped snapshot"
    table = Table(title=f"spot offers for {report.count} node(s), single AZ "
                        f"(on-demand prices: {source})")
    for name, justify, wrap in (
            ("rank", "right", False), ("type", "left", False), ("region", "left", False),
            ("AZ", "left", False), ("spot $/h", "right", False),
            ("on-demand $/h", "right", False), ("discount", "right", False),
            ("$/unit-h", "right", False), ("placement score", "right", True),
            ("note", "left", True)):
        table.add_column(name, justify=justify, no_wrap=not wrap)  # type: ignore[arg-type]
    for r in report.ranked:
        o = r.offer
        table.add_row(
            "-" if r.rank is None else str(r.rank), o.instance_type, o.region,
            f"{o.az} ({o.az_id})", _money(o.price), _money(o.on_demand_price),
            "-" if o.discount is None else f"{100 * o.discount:.0f}%",
            _per_unit(o), "?" if o.placement_score is None else str(o.placement_score),
            r.note, style="dim" if r.rank is None else ("bold green" if r.rank == 1 else None))
    for region, why in sorted(report.region_errors.items()):
        table.add_row("-", "(all)", region, "-", "-", "-", "-", "-", "-",
                      f"region failed: {why}", style="red")
    return table


@click.command()
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False))
@click.option("--instance-types", help="Comma-separated instance types (replace the spec's).")
@click.option("--regions", help="Comma-separated regions to search (replace the spec's).")
@click.option("--count", type=click.IntRange(min=1), help="Nodes wanted in one AZ.")
@json_option
def spot(spec_file: str | None, instance_types: str | None, regions: str | None,
         count: int | None) -> None:
    """Spot-price search: type, region/AZ, spot and on-demand $/h, discount, capacity score.

    \b
    Examples:
      clusterkit spot examples/imagenet-p4d-spot.yaml
      clusterkit spot --instance-types p4d.24xlarge,p5.48xlarge \\
                      --regions us-east-1,us-west-2 --count 4
    """
    from clusterkit.catalog.report import report_footer, report_json
    from clusterkit.cluster.ops.price_search import do_spot

    ctx = get_ctx()
    with _progress(ctx.err_console) as progress:
        report = do_spot(spec_file, instance_types=_split(instance_types),
                         regions=_split(regions), count=count, region=ctx.region,
                         profile=ctx.profile, progress=progress)
    if ctx.json:
        print_json(report_json(report))
        return
    ctx.console.print(report_table(report))
    for line in report_footer(report):
        ctx.console.print(f"[yellow]{escape(line)}[/yellow]")


COMMANDS = [spot]
