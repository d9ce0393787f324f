"""`clusterkit --help`: the commands grouped by the stage of the pipeline they belong to,
in the order a job goes through them."""

from __future__ import annotations

import click

# stage heading -> its commands, in pipeline order. A command not named here is listed
# under OTHER, so a new command is never missing from the help.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("Spec", ("validate", "schema")),
    ("Cluster", ("iam-policy", "spot", "capacity-blocks", "image", "plan", "up", "status",
                 "exec", "ssh", "autostop", "down")),
    ("Data", ("pack", "snapshot-dataset", "deploy-dataset")),
    ("Training", ("train", "logs", "top", "job", "scaling", "stop")),
    ("Sandbox", ("sandbox",)),
)
OTHER = "Other"


def grouped(names: list[str]) -> list[tuple[str, list[str]]]:
    """(heading, command names) per stage that has any of ``names``, in STAGES order;
    names no stage claims go last under OTHER, sorted."""
    present = set(names)
    groups = [(heading, [n for n in commands if n in present]) for heading, commands in STAGES]
    claimed = {n for _, commands in STAGES for n in commands}
    groups.append((OTHER, sorted(present - claimed)))
    return [(heading, commands) for heading, commands in groups if commands]


def format_commands(group: click.Group, ctx: click.Context,
                    formatter: click.HelpFormatter) -> None:
    """click's command listing, one section per stage instead of one alphabetical list."""
    visible = {name: cmd for name in group.list_commands(ctx)
               if (cmd := group.get_command(ctx, name)) is not None and not cmd.hidden}
    if not visible:
        return
    width = max(len(name) for name in visible)  # one column for every section
    limit = formatter.width - 6 - width
    for heading, names in grouped(list(visible)):
        rows = [(name.ljust(width), visible[name].get_short_help_str(limit)) for name in names]
        with formatter.section(f"{heading} commands"):
            formatter.write_dl(rows)
