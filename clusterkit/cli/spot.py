"""`clusterkit spot`."""

import click

from clusterkit.errors import NotYetAvailable


@click.command()
@click.argument("spec_file", required=False, type=click.Path(dir_okay=False))
def spot(spec_file: str | None) -> None:
    """Spot-price search: type, region/AZ, spot and on-demand $/h, discount, capacity score."""
    raise NotYetAvailable("spot")


COMMANDS = [spot]
