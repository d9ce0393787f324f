"""`clusterkit` entry point: global options, command registration, error exit codes."""

from __future__ import annotations

import sys
from typing import Any

import click

from clusterkit import __version__
from clusterkit.cli import dataset, pack, provision, remote, sandbox, spot, train, validate
from clusterkit.cli.context import CliContext, sandbox_requested
from clusterkit.cli.render import render_error
from clusterkit.errors import ClusterkitError

# Commands that never talk to AWS or SSH: sandbox mode has nothing to set up for them.
OFFLINE_COMMANDS = frozenset({None, "sandbox", "validate", "schema", "pack"})


class ClusterkitGroup(click.Group):
    """Turns ClusterkitError into message + hint and exit 1/2; click usage errors exit 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ClusterkitError as err:
            obj = ctx.find_object(CliContext) or CliContext()
            if obj.debug:
                raise
            render_error(err, obj.err_console)
            ctx.exit(err.exit_code)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
            raise
        except Exception as exc:  # a bug or an untranslated library error: still no traceback
            obj = ctx.find_object(CliContext) or CliContext()
            if obj.debug:
                raise
            render_error(ClusterkitError(f"unexpected error: {type(exc).__name__}: {exc}",
                                         "run again with --debug for the traceback, and "
                                         "please report it"), obj.err_console)
            ctx.exit(1)


@click.group(cls=ClusterkitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="clusterkit")
@click.option("--region", envvar="AWS_REGION", help="AWS region (default: the spec's, then AWS_REGION).")
@click.option("--profile", envvar="AWS_PROFILE", help="AWS named profile, as in the AWS CLI.")
@click.option("--debug", is_flag=True, help="Show tracebacks and AWS/SSH debug output.")
@click.option("--json", "json_output", is_flag=True, help="Machine-readable JSON on stdout.")
@click.option("--sandbox", is_flag=True,
              help="Use the local sandbox (also CLUSTERKIT_SANDBOX=1).")
@click.pass_context
def cli(ctx: click.Context, region: str | None, profile: str | None, debug: bool,
        json_output: bool, sandbox: bool) -> None:
    """clusterkit: one YAML file to a GPU training cluster on AWS, and back to nothing.

    \b
      clusterkit up cluster.yaml
      clusterkit deploy-dataset cluster.yaml --snapshot snap-...
      clusterkit train cluster.yaml
      clusterkit down cluster.yaml
    """
    ctx.obj = CliContext(region=region, profile=profile, debug=debug, json=json_output,
                         sandbox=sandbox_requested(sandbox))
    if ctx.obj.sandbox and ctx.invoked_subcommand not in OFFLINE_COMMANDS:
        from clusterkit.sandbox.client import enter_sandbox_mode

        enter_sandbox_mode(ctx.obj.err_console)


for module in (validate, spot, provision, remote, pack, dataset, train, sandbox):
    for command in module.COMMANDS:
        cli.add_command(command)


def main() -> None:
    try:
        cli.main(prog_name="clusterkit", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        sys.exit(code)
