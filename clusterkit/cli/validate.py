"""`clusterkit validate`, `clusterkit schema`."""

import click
from rich.markup import escape

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.render import print_json, render_error
from clusterkit.errors import SpecError
from clusterkit.spec.report import do_validate
from clusterkit.spec.schema import json_schema


@click.command()
@click.argument("spec_files", nargs=-1, required=True, metavar="FILE...",
                type=click.Path(dir_okay=False))
@click.option("--strict", is_flag=True, help="Treat warnings as errors (exit 2).")
@json_option
def validate(spec_files: tuple[str, ...], strict: bool) -> None:
    """Check cluster specs (schema and meaning); no AWS call. Exit 2 if any is invalid.

    Every problem is printed as FILE:LINE:COL, the key path, what is wrong and a hint.
    Warnings are printed but do not fail (unless --strict).

    \b
    Example:
      clusterkit validate examples/*.yaml --strict
    """
    ctx = get_ctx()
    report = do_validate(spec_files, strict=strict)
    err = ctx.err_console  # soft-wrapped: one issue is one line
    if ctx.json:
        print_json(report.to_json())
    else:
        for result in report.files:
            if not result.ok:
                render_error(SpecError(list(result.issues), "fix the errors above and run "
                                       "`clusterkit validate` again"), err)
                continue
            for issue in result.issues:
                err.print(f"[yellow]{escape(issue.format())}[/yellow]")
            extra = f" ({result.warnings} warning(s))" if result.warnings else ""
            ctx.console.print(f"[green]ok[/green]: {escape(result.file)}{escape(extra)}")
    if not report.ok:
        click.get_current_context().exit(2)


@click.command()
def schema() -> None:
    """Print the JSON Schema of cluster.yaml (for editor completion and checks).

    \b
    Example:
      clusterkit schema > cluster.schema.json
    then put this first line in cluster.yaml (yaml-language-server, e.g. VS Code YAML):
    # yaml-language-server: $schema=./cluster.schema.json
    """
    print_json(json_schema())


COMMANDS = [validate, schema]
