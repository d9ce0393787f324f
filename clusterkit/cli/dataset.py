"""`clusterkit deploy-dataset`."""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

import click
from rich.console import Console

from clusterkit.cli.context import check_spec_argument, get_ctx, json_option
from clusterkit.cli.render import print_json
from clusterkit.errors import UsageError

if TYPE_CHECKING:
    from clusterkit.cluster.dataset.deploy import DeployResult

TIMEOUT_HELP = "Give up waiting after this many seconds (default 1800)."


def check_snapshot_id(value: str | None) -> str | None:
    """A snapshot id has the form the spec's storage.dataset.snapshot has (exit 2 before
    any call): snap- and 8 or 17 hex digits."""
    from clusterkit.spec.keys import DATASET

    key = DATASET.keys["snapshot"]  # type: ignore[index]
    if value is not None and not re.match(key.pattern or "", value):
        raise UsageError(f"--snapshot {value!r} is not {key.what}",
                         f"give the id of an EBS snapshot, e.g. {key.example}")
    return value


@click.command("deploy-dataset")
@click.argument("spec_file", type=click.Path(dir_okay=False), callback=check_spec_argument)
@click.option("--snapshot", callback=lambda _c, _p, v: check_snapshot_id(v),
              help="EBS snapshot id (snap-...) holding the dataset "
              "(default: the spec's storage.dataset.snapshot).")
@click.option("--verify", type=click.Choice(["size", "full"]), default="size",
              show_default=True, help="Check every file's size against the manifest, or "
              "its SHA-256 too (reads everything).")
@click.option("--prewarm", is_flag=True, help="Read every block once on every node "
              "(for volumes without an initialization rate).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask before replacing the volumes "
              "of another snapshot (needed without a terminal).")
@click.option("--timeout", type=float, default=1800.0, show_default=True, help=TIMEOUT_HELP)
@json_option
def deploy_dataset(spec_file: str, snapshot: str | None, verify: str, prewarm: bool,
                   yes: bool, timeout: float) -> None:
    """Clone an EBS snapshot onto every node (one encrypted volume per node, in its AZ),
    mount it read-only and verify it against the dataset's manifest.

    Checks first that the snapshot exists in the cluster's region, is completed (and
    fully published) and fits storage.dataset.size_gb (exit 2 otherwise). Idempotent: a
    node that has its clone attached keeps it. A different snapshot replaces the old
    clones after confirmation. `clusterkit down` deletes the clones with the cluster.

    \b
    Example:
      clusterkit deploy-dataset examples/sandbox-cpu.yaml --snapshot snap-0123456789abcdef0
    """
    from clusterkit.cli.provision import _ask, runtime
    from clusterkit.cluster.dataset.deploy import do_deploy_dataset

    ctx = get_ctx()
    result = do_deploy_dataset(spec_file, snapshot=snapshot, verify=verify, prewarm=prewarm,
                               yes=yes or ctx.yes, confirm=_ask if sys.stdin.isatty() else None,
                               rt=runtime(), profile=ctx.profile, timeout=timeout)
    if ctx.json:
        print_json(result.to_json())
    else:
        render_deploy(ctx.console, result)


def render_deploy(console: Console, result: DeployResult) -> None:
    """One line per node: its volume, what deploy did, and what the node's check said."""
    what = "deployed" if result.changed else "already deployed (nothing changed)"
    console.print(f"[bold green]dataset {result.snapshot} {what}[/bold green] on "
                  f"{len(result.nodes)} node(s) of {result.cluster} ({result.size_gib} GiB "
                  "each)", highlight=False)
    for n in result.nodes:
        console.print(f"  {n.index:>3} {n.instance_id} {n.volume_id} {n.action:<8} {n.line}",
                      markup=False, highlight=False)
    if result.removed:
        console.print(f"removed the old dataset volume(s): {', '.join(result.removed)}",
                      markup=False, highlight=False)


COMMANDS = [deploy_dataset]
