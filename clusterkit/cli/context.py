"""Options every command shares, carried on click's context object."""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click
from rich.console import Console

from clusterkit.errors import UsageError

if TYPE_CHECKING:
    from clusterkit.cli.events import ConsoleReporter

WIDE_OUTPUT = 200
F = TypeVar("F", bound=Callable[..., Any])


@dataclass
class CliContext:
    region: str | None = None
    profile: str | None = None
    debug: bool = False
    json: bool = False
    sandbox: bool = False
    yes: bool = False
    reporters: list[ConsoleReporter] = field(default_factory=list)

    def reporter(self, console: Console) -> ConsoleReporter:
        """A reporter printing on ``console``, closed when the command ends however it
        ends (a live bar must not outlive an error or Ctrl-C)."""
        from clusterkit.cli.events import ConsoleReporter

        made = ConsoleReporter(console)
        self.reporters.append(made)
        return made

    def close_reporters(self) -> None:
        while self.reporters:
            self.reporters.pop().close()

    @property
    def console(self) -> Console:
        """Human output (progress, tables) goes to stderr when --json owns stdout."""
        return _console(stderr=self.json)

    @property
    def err_console(self) -> Console:
        return _console(stderr=True, soft_wrap=True)


def _console(*, stderr: bool, soft_wrap: bool = False) -> Console:
    """A terminal keeps its own width; a pipe or file gets wide lines instead of rich's
    80-column default, so tables are not cut to ellipses in logs and CI output."""
    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() or os.environ.get("COLUMNS") else WIDE_OUTPUT
    return Console(stderr=stderr, highlight=False, soft_wrap=soft_wrap, width=width)


def sandbox_requested(flag: bool) -> bool:
    return flag or os.environ.get("CLUSTERKIT_SANDBOX", "") not in ("", "0", "false", "no")


def get_ctx() -> CliContext:
    """The CliContext of the running command (set up by the top-level group)."""
    ctx = click.get_current_context()
    obj = ctx.find_object(CliContext)
    if obj is None:  # a command invoked on its own, e.g. from a test
        obj = CliContext()
        ctx.obj = obj
    return obj


def json_option(func: F) -> F:
    """`--json` on a read command; may also be given before the command name."""

    def _set(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        if value:
            get_ctx().json = True
        return value

    return click.option("--json", "json_output", is_flag=True, expose_value=False,
                        is_eager=True, callback=_set,
                        help="Print machine-readable JSON on stdout (errors too).")(func)


# The global options: (flags, CliContext attribute, help). Each works before the command
# name (the group's own option) and after it (added to every command by global_options).
GLOBAL_OPTIONS: tuple[tuple[tuple[str, ...], str, str], ...] = (
    (("--region",), "region", "AWS region: narrows where a cluster is looked for and where `up` may launch."),
    (("--profile",), "profile", "AWS named profile, as in the AWS CLI."),
    (("--json",), "json", "Machine-readable JSON on stdout (errors too)."),
    (("--debug",), "debug", "Show tracebacks and AWS/SSH debug output."),
    (("--sandbox",), "sandbox", "Use the local sandbox (also CLUSTERKIT_SANDBOX=1)."),
)
YES_OPTION = (("--yes", "-y"), "yes", "Do not ask for confirmation.")
FLAGS = frozenset({"json", "debug", "sandbox", "yes"})
AWS_ONLY = frozenset({"region", "profile", "sandbox"})
WRAPPED = "__clusterkit_global_options__"  # marks a callback global_options wrapped


def _setter(attr: str) -> Callable[[click.Context, click.Parameter, Any], Any]:
    def _set(_ctx: click.Context, _param: click.Parameter, value: Any) -> Any:
        if value and attr == "region":
            from clusterkit.catalog.regions import check_region

            check_region(value, "--region")  # before any call: a typo dials a made-up host
        if value:  # unset after the command keeps what was given before it
            setattr(get_ctx(), attr, value)
        return value

    return _set


def _option(flags: tuple[str, ...], attr: str, help_text: str, *, hidden: bool) -> click.Option:
    """Eager, so it is set before any argument callback (a bad NAME under --json still
    answers in JSON)."""
    return click.Option(list(flags), is_flag=attr in FLAGS,
                        default=False if attr in FLAGS else None, expose_value=False,
                        is_eager=True, callback=_setter(attr), hidden=hidden, help=help_text)


def _has_flag(command: click.Command, flag: str) -> bool:
    return any(flag in p.opts for p in command.params if isinstance(p, click.Option))


def leaf_commands(command: click.Command) -> Iterator[click.Command]:
    """``command`` itself, or every command under it when it is a group; hidden ones (the
    master's recovery-controller: no user runs it) are left out."""
    if command.hidden:
        return
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            yield from leaf_commands(sub)
    else:
        yield command


def global_options(command: click.Command, *, offline: bool = False,
                   asks: bool = False) -> click.Command:
    """Add the global options to ``command`` (those it does not define itself) and, for a
    command that may talk to AWS, enter sandbox mode once its options are parsed.

    offline: never talks to AWS or SSH (its AWS options are hidden, sandbox mode is not
    entered). A command's own ``--offline`` flag, when given, counts the same.
    asks: the command asks for confirmation, so it gets ``--yes`` too."""
    wanted = [*GLOBAL_OPTIONS, YES_OPTION] if asks else list(GLOBAL_OPTIONS)
    for flags, attr, help_text in wanted:
        if not _has_flag(command, flags[0]):
            command.params.append(_option(flags, attr, help_text,
                                          hidden=offline and attr in AWS_ONLY))
    if command.callback is not None and not hasattr(command.callback, WRAPPED):
        command.callback = _entering_sandbox(command.callback, offline)
    return command


def _entering_sandbox(callback: Callable[..., Any], offline: bool) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        obj = get_ctx()
        if not offline and not kwargs.get("offline"):
            check_region_variables()
        if obj.sandbox and not offline and not kwargs.get("offline"):
            from clusterkit.sandboxmode import enter_sandbox_mode

            endpoint = enter_sandbox_mode()
            obj.err_console.print(f"[yellow]sandbox mode:[/yellow] AWS endpoint {endpoint}",
                                  highlight=False)
        try:
            return callback(*args, **kwargs)
        finally:
            obj.close_reporters()

    setattr(run, WRAPPED, True)
    return run


REGION_VARIABLES = ("AWS_REGION", "AWS_DEFAULT_REGION")  # the AWS CLI's order


def check_region_variables() -> None:
    """AWS_REGION / AWS_DEFAULT_REGION name an AWS region (exit 2 before any call)."""
    from clusterkit.catalog.regions import check_region

    for name in REGION_VARIABLES:
        if os.environ.get(name):
            check_region(os.environ[name], name)


def check_target_argument(_ctx: click.Context, _param: click.Parameter,
                          value: str | None) -> str | None:
    """Argument callback for NAME / SPEC|NAME: a cluster name, or an existing spec file
    that validates (exit 2 otherwise), checked before the command does anything."""
    from clusterkit.cluster.access.target import check_target
    from clusterkit.spec import load

    if check_target(value) and value is not None:
        load(os.path.expanduser(value))
    return value


def check_spec_argument(_ctx: click.Context, _param: click.Parameter, value: str) -> str:
    """Argument callback for a SPEC_FILE a command will need whole: the file must exist
    and validate (exit 2 otherwise), before the command does anything."""
    from clusterkit.spec import load

    if not os.path.isfile(os.path.expanduser(value)):
        raise UsageError(f"no spec file {value!r}", "give the path of an existing cluster "
                         "spec (.yaml); `clusterkit validate FILE` checks one")
    load(os.path.expanduser(value))
    return value
