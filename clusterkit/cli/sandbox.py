"""`clusterkit sandbox start|stop|status`."""

import click

from clusterkit.errors import NotYetAvailable


@click.group()
def sandbox() -> None:
    """Local AWS endpoint + SSH nodes on loopback, for demos and tests."""


@sandbox.command()
def start() -> None:
    """Start the emulator and the node agent in the background."""
    raise NotYetAvailable("sandbox start")


@sandbox.command()
def stop() -> None:
    """Stop everything the sandbox started and remove its mounts and loop devices."""
    raise NotYetAvailable("sandbox stop")


@sandbox.command("status")
def status_() -> None:
    """Endpoint, nodes and their addresses."""
    raise NotYetAvailable("sandbox status")


COMMANDS = [sandbox]
