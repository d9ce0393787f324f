"""`clusterkit snapshot-dataset`: DIR (EBS direct APIs, no instance) or NAME --node/--path
(a node's volume), wired to cluster.publish; renders the PublishResult."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.events import ConsoleReporter
from clusterkit.cli.render import print_json
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import UsageError

if TYPE_CHECKING:
    from clusterkit.cluster.dataset.publish import PublishResult


@click.command("snapshot-dataset")
@click.argument("source")
@click.option("--name", "label", help="Dataset label, tagged on the snapshot "
              "(default: the directory's or the path's name).")
@click.option("--node", help="With NAME: the node whose volume to snapshot (index or name; "
              "default: the master).")
@click.option("--path", "mount", help="With NAME: where the dataset volume is mounted on "
              "the node, e.g. /data.")
@click.option("--threads", type=click.IntRange(1, 64), default=16, show_default=True,
              help="Blocks uploaded at once (DIR).")
@click.option("--tmp-dir", type=click.Path(file_okay=False),
              help="Where the ext4 image is built (DIR; removed after the upload).")
@click.option("--kms-key", help="KMS key that encrypts the snapshot (id, ARN or alias/NAME; "
              "default: a spec's storage.kms_key, else the account's default EBS key).")
@json_option
def snapshot_dataset(source: str, label: str | None, node: str | None, mount: str | None,
                     threads: int, tmp_dir: str | None, kms_key: str | None) -> None:
    """Publish a dataset as an EBS snapshot that deploy-dataset clones onto every node.

    \b
    Examples:
      clusterkit snapshot-dataset data/imagenet --region us-east-1 --name imagenet
      clusterkit snapshot-dataset mycluster --node 0 --path /data --name imagenet

    SOURCE is a local directory (uploaded with the EBS direct APIs, no instance needed),
    or, with --path, a cluster NAME or spec file. The snapshot is always encrypted.
    Prints the snapshot id.
    """
    from clusterkit.cluster.dataset import publish

    ctx = get_ctx()
    rt = Runtime.make(region=ctx.region, profile=ctx.profile)
    with ConsoleReporter(ctx.err_console, unit="MiB") as report:
        rt.report = report
        if mount is None:
            if node is not None:
                raise UsageError("--node needs --path", "give --path MOUNT with --node, or "
                                 "a local directory without --node")
            result = publish.do_snapshot_dataset(source, label=label, region=ctx.region,
                                                 rt=rt, threads=threads, tmp_dir=tmp_dir,
                                                 kms_key=kms_key)
        else:
            from clusterkit.cluster.access.target import check_target

            check_target(source)
            result = publish.do_snapshot_volume(source, node=node, path=mount, label=label,
                                                region=ctx.region, rt=rt, kms_key=kms_key)
    render(result, ctx.json)


def render(result: PublishResult, as_json: bool) -> None:
    if as_json:
        print_json(result.to_json())
        return
    if result.source == "directory":
        click.echo(f"uploaded {result.bytes_uploaded / 1e6:,.1f} MB in "
                   f"{result.blocks_put} blocks ({result.blocks_skipped} all-zero skipped), "
                   f"{result.mb_per_s:,.1f} MB/s", err=True)
    click.echo(result.snapshot_id)


COMMANDS = [snapshot_dataset]
