"""Options every command shares, carried on click's context object."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import click
from rich.console import Console

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
                        callback=_set, help="Print machine-readable JSON on stdout.")(func)
