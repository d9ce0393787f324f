"""`clusterkit` entry point: global options, command registration, error exit codes."""

from __future__ import annotations

import functools
import gc
import importlib
import signal
import sys
from typing import TYPE_CHECKING, Any

import click

from clusterkit import __version__
from clusterkit.cli import help
from clusterkit.cli.context import CliContext, global_options, leaf_commands, sandbox_requested
from clusterkit.cli.render import error_json, print_error_json, print_json, render_error
from clusterkit.errors import ClusterkitError, UsageError

if TYPE_CHECKING:  # importlib.metadata: ~30 ms, only where entry points are read
    from importlib.metadata import EntryPoint

# Commands that never talk to AWS or SSH: sandbox mode has nothing to set up for them
# (nor for `plan --offline`: a command's own --offline flag counts the same).
OFFLINE_COMMANDS = frozenset({"sandbox", "validate", "schema", "pack", "iam-policy"})
# Commands that ask before spending or deleting: they take --yes after the name too.
ASKING_COMMANDS = frozenset({"up", "down", "deploy-dataset", "capacity-blocks"})
# Every command -> the module of clusterkit.cli that defines it (its COMMANDS), imported
# only when the command runs or help lists it: a command loads its own code, not every
# other command's (all of them took ~0.1 s of CPU at each start).
COMMAND_MODULES = {
    "validate": "validate", "schema": "validate", "iam-policy": "iam", "spot": "spot",
    "capacity-blocks": "capacity", "plan": "provision", "up": "provision",
    "status": "provision", "down": "provision", "exec": "remote", "ssh": "remote",
    "pack": "pack", "snapshot-dataset": "publish", "deploy-dataset": "dataset",
    "train": "train", "logs": "train", "stop": "train", "recovery-controller": "train",
    "top": "top", "job": "top", "scaling": "top", "autostop": "autostop",
    "image": "image",
}
# Commands other installed packages add: entry points of this group, each a click command
# named as the entry point (`sandbox = "clusterkit_sandbox.cli:sandbox"`), read only when
# a command's name is not one of COMMAND_MODULES or when help lists every command.
ENTRY_POINT_GROUP = "clusterkit.commands"
# The commands of clusterkit's own packages beside it: name -> the package that adds it,
# for the error that says how to install it.
ADD_ONS = {"sandbox": "clusterkit-sandbox"}
ADD_ON_HINT = ("install it beside clusterkit: `pip install -e ./sandbox` in a clusterkit "
               "checkout (scripts/install.sh installs it)")
INTERRUPTED = 130  # the exit code of Ctrl-C (128 + SIGINT), as a shell's
DEBUG_HINT = ("run the same command again with --debug (before or after the command name) "
              "for the traceback, and please report it")


def _json_requested(ctx: click.Context) -> bool:
    """--json given anywhere before a ``--`` (also when parsing failed before its callback
    could run)."""
    obj = ctx.find_object(CliContext)
    args = ctx.meta.get("clusterkit.argv", [])
    return bool(obj and obj.json) or "--json" in (args[:args.index("--")] if "--" in args
                                                  else args)


def _click_error_json(ctx: click.Context, exc: click.ClickException) -> None:
    """A click usage error (exit 2) as JSON on stdout, then exit with its code."""
    hint = None
    if isinstance(exc, click.UsageError) and exc.ctx is not None:
        hint = f"see `{exc.ctx.command_path} --help`"
    print_json(error_json(exc.format_message(), hint, exc.exit_code))
    ctx.exit(exc.exit_code)


class ClusterkitGroup(click.Group):
    """Turns ClusterkitError into message + hint and exit 1/2; click usage errors exit 2.
    Under --json every error is ``{"error", "hint", "exit_code"}`` on stdout."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        help.format_commands(self, ctx, formatter)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMAND_MODULES, *added_commands()})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            if cmd_name in COMMAND_MODULES:
                load_commands(COMMAND_MODULES[cmd_name])
            elif cmd_name in added_commands():
                load_added(added_commands()[cmd_name])
        return self.commands.get(cmd_name)

    def resolve_command(self, ctx: click.Context, args: list[str]
                        ) -> tuple[str | None, click.Command | None, list[str]]:
        name = click.utils.make_str(args[0]) if args else None
        if name in ADD_ONS and self.get_command(ctx, name) is None:
            raise UsageError(f"`clusterkit {name}` comes with the {ADD_ONS[name]} package, "
                             "which is not installed", ADD_ON_HINT)
        return super().resolve_command(ctx, args)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta["clusterkit.argv"] = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.ClickException as exc:
            if _json_requested(ctx):
                _click_error_json(ctx, exc)
            raise

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ClusterkitError as err:
            if _debug(ctx):
                raise
            _fail(ctx, err)
        except KeyboardInterrupt:
            if _json_requested(ctx):
                print_json(error_json("interrupted", None, INTERRUPTED))
            else:
                click.echo("interrupted", err=True)
            ctx.exit(INTERRUPTED)
        except click.exceptions.Exit:
            raise
        except click.ClickException as exc:
            if _json_requested(ctx):
                _click_error_json(ctx, exc)
            raise
        except click.exceptions.Abort:
            if _json_requested(ctx):
                print_json(error_json("aborted", None, 1))
                ctx.exit(1)
            raise
        except Exception as exc:  # a bug or an untranslated library error: still no traceback
            if _debug(ctx):
                raise
            _fail(ctx, ClusterkitError(f"unexpected error: {type(exc).__name__}: {exc}",
                                       DEBUG_HINT))


def _debug(ctx: click.Context) -> bool:
    obj = ctx.find_object(CliContext)
    return bool(obj and obj.debug)


def _fail(ctx: click.Context, err: ClusterkitError) -> None:
    """Message + hint on stderr (or JSON on stdout under --json), then exit 1 or 2."""
    if _json_requested(ctx):
        print_error_json(err)
    else:
        render_error(err, (ctx.find_object(CliContext) or CliContext()).err_console)
    ctx.exit(err.exit_code)


@click.group(cls=ClusterkitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="clusterkit")
@click.option("--region", help="AWS region: narrows where a cluster is looked for and where "
              "`up` may launch (AWS_REGION / AWS_DEFAULT_REGION pick the default region "
              "where there is no spec, and never narrow).")
@click.option("--profile", envvar="AWS_PROFILE", help="AWS named profile, as in the AWS CLI.")
@click.option("--debug", is_flag=True, help="Show tracebacks and AWS/SSH debug output.")
@click.option("--json", "json_output", is_flag=True, help="Machine-readable JSON on stdout.")
@click.option("--sandbox", is_flag=True,
              help="Use the local sandbox (also CLUSTERKIT_SANDBOX=1).")
@click.option("--yes", "-y", is_flag=True,
              help="Do not ask for confirmation (up, down, deploy-dataset).")
@click.pass_context
def cli(ctx: click.Context, region: str | None, profile: str | None, debug: bool,
        json_output: bool, sandbox: bool, yes: bool) -> None:
    """clusterkit: one YAML file to a GPU training cluster on AWS, and back to nothing.

    \b
      clusterkit up cluster.yaml
      clusterkit deploy-dataset cluster.yaml --snapshot snap-...
      clusterkit train cluster.yaml
      clusterkit down cluster.yaml

    Global options (--region, --profile, --json, --debug, --sandbox, --yes) work before
    or after the command name. Exit codes: 0 ok; 1 runtime failure, not found or
    declined; 2 usage error or invalid spec.
    """
    ctx.obj = CliContext(region=region, profile=profile, debug=debug, json=json_output,
                         sandbox=sandbox_requested(sandbox), yes=yes)
    if region:
        from clusterkit.catalog.regions import check_region

        check_region(region, "--region")  # before any call: a typo dials a made-up host


def load_commands(module_name: str) -> None:
    """The commands of ``clusterkit.cli.<module_name>`` added to ``cli``, each with the
    global options (once)."""
    module = importlib.import_module(f"clusterkit.cli.{module_name}")
    for command in module.COMMANDS:
        _add(command)
    # on the master, as `train --detach` left it: its environment is set for it (no
    # --sandbox, no global options)
    controller = getattr(module, "recovery_controller", None)
    if controller is not None:
        cli.add_command(controller)


def _add(command: click.Command) -> None:
    """``command`` added to ``cli`` with the global options (once)."""
    if command.name in cli.commands:
        return
    cli.add_command(command)
    for leaf in leaf_commands(command):
        global_options(leaf, offline=command.name in OFFLINE_COMMANDS,
                       asks=leaf is command and command.name in ASKING_COMMANDS)


@functools.cache
def added_commands() -> dict[str, EntryPoint]:
    """The commands installed packages add (ENTRY_POINT_GROUP): name -> entry point; a
    built-in command's name stays the built-in's."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)
            if ep.name not in COMMAND_MODULES}


def load_added(entry: EntryPoint) -> None:
    """The command an installed package adds, added to ``cli`` under its entry point's
    name."""
    try:
        command = entry.load()
    except Exception as exc:  # a broken package: say which, not a traceback
        raise ClusterkitError(f"the command {entry.name} ({entry.value}) does not load: "
                              f"{type(exc).__name__}: {exc}",
                              "reinstall the package that adds it, or uninstall it") from exc
    if not isinstance(command, click.Command) or command.name != entry.name:
        raise ClusterkitError(f"the command {entry.name} ({entry.value}) is not a click "
                              f"command named {entry.name}",
                              "reinstall the package that adds it, or uninstall it")
    _add(command)


def load_all_commands() -> click.Group:
    """``cli`` with every command loaded, those installed packages add too (help, docs
    and tests that walk them all)."""
    for module_name in sorted(set(COMMAND_MODULES.values())):
        load_commands(module_name)
    for entry in added_commands().values():
        load_added(entry)
    return cli


def main() -> None:
    # Every object alive now (the imported modules) is left out of the collector's
    # passes, now and at the exit, where collecting the heap of a command that loaded
    # paramiko took ~50 ms after its work was done.
    gc.freeze()
    try:
        cli.main(prog_name="clusterkit", standalone_mode=True)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code == INTERRUPTED:  # another Ctrl-C must not kill the exit itself: Python's
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # exit resets a handler, not SIG_IGN
        sys.exit(code)
    finally:
        gc.freeze()
