"""`clusterkit sandbox start|stop|status`."""

from __future__ import annotations

from typing import Any

import click

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.render import print_json

DIR_OPTION = click.option(
    "--dir", "directory", envvar="CLUSTERKIT_SANDBOX_DIR", type=click.Path(file_okay=False),
    help="State directory (default ~/.clusterkit/sandbox; also CLUSTERKIT_SANDBOX_DIR).")


@click.group()
def sandbox() -> None:
    """Local AWS endpoint + SSH nodes on loopback, for demos and tests."""


@sandbox.command()
@DIR_OPTION
@json_option
def start(directory: str | None) -> None:
    """Start the emulator and the node agent in the background."""
    from clusterkit.sandbox.control import do_start

    result = do_start(directory)
    _render(result, "already running" if result["already_running"] else "started")


@sandbox.command()
@DIR_OPTION
@json_option
def stop(directory: str | None) -> None:
    """Stop everything the sandbox started and remove its mounts and loop devices."""
    from clusterkit.sandbox.control import do_stop

    result = do_stop(directory)
    if get_ctx().json:
        print_json(result)
        return
    what = "stopped" if result["was_running"] else "was not running"
    get_ctx().console.print(
        f"sandbox {what}; cleaned up: {result['killed']} process(es), "
        f"{result['unmounted']} mount(s), {result['loops_detached']} loop device(s)")


@sandbox.command("status")
@DIR_OPTION
@json_option
def status_(directory: str | None) -> None:
    """Endpoint, nodes and their addresses."""
    from clusterkit.sandbox.control import do_status

    _render(do_status(directory), "")


def _render(status: dict[str, Any], verb: str) -> None:
    ctx = get_ctx()
    if ctx.json:
        print_json(status)
        return
    from clusterkit.sandbox.report import render_status

    render_status(status, ctx.console, verb)


COMMANDS = [sandbox]
