"""`clusterkit spot`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

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
      clusterkit spot cluster.yaml
      clusterkit spot --instance-types p4d.24xlarge,p5.48xlarge \\
                      --regions us-east-1,us-west-2 --count 4
    """
    from clusterkit.aws.offers import do_spot
    from clusterkit.catalog.report import report_footer, report_json, report_table

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
