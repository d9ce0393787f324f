"""`clusterkit pack`: im2rec.py's options, wired to dataset.packer.do_pack()."""

from __future__ import annotations

import click

from clusterkit.cli.context import get_ctx, json_option
from clusterkit.cli.events import ConsoleReporter
from clusterkit.cli.render import print_json


class Im2recCommand(click.Command):
    """Accepts im2rec's argparse-style ``--exts .jpg .png`` (several values after one flag)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        out: list[str] = []
        greedy = False
        for arg in args:
            if arg == "--exts":
                greedy = True
            elif greedy and not arg.startswith("-"):
                out += ["--exts", arg]
            else:
                greedy = False
                out.append(arg)
        if greedy:
            out.append("--exts")  # let click report the missing value
        return super().parse_args(ctx, out)


@click.command(cls=Im2recCommand, context_settings={"max_content_width": 100})
@click.argument("prefix")
@click.argument("root")
@click.option("--list", "make_list", is_flag=True,
              help="Make image list(s) <prefix>.lst by walking ROOT instead of packing.")
@click.option("--exts", multiple=True, metavar="EXT",
              help="Image extensions to list (repeatable or space-separated; "
                   "case-insensitive). Default: .jpeg .jpg .png")
@click.option("--chunks", type=click.IntRange(min=1), default=1, show_default=True,
              help="Number of list chunks.")
@click.option("--train-ratio", type=click.FloatRange(0.0, 1.0), default=1.0, show_default=True,
              help="Fraction of images for training.")
@click.option("--test-ratio", type=click.FloatRange(0.0, 1.0), default=0.0, show_default=True,
              help="Fraction of images for testing.")
@click.option("--recursive", is_flag=True,
              help="Walk subdirectories; each directory with images is one label.")
@click.option("--no-shuffle", is_flag=True, help="Keep walk order (default: seed-100 shuffle).")
@click.option("--pass-through", is_flag=True, help="Pack the files' bytes as they are.")
@click.option("--resize", type=click.IntRange(min=0), default=0, show_default=True,
              help="Resize the shorter edge to this many pixels (0: keep).")
@click.option("--center-crop", is_flag=True, help="Crop the center square first.")
@click.option("--quality", type=click.IntRange(1, 100), default=95, show_default=True,
              help="JPEG quality 1-100, or PNG compression 1-9.")
@click.option("--num-thread", type=click.IntRange(min=1), default=1, show_default=True,
              help="Encoding threads (output order is the .lst order whatever the count).")
@click.option("--color", type=click.Choice(["-1", "0", "1"]), default="1", show_default=True,
              help="1: color, 0: grayscale, -1: unchanged (alpha kept).")
@click.option("--encoding", type=click.Choice([".jpg", ".png"]), default=".jpg",
              show_default=True, help="Encoding of the packed images.")
@click.option("--pack-label", is_flag=True,
              help="Pack every label of a multi-label .lst into the record.")
@json_option
def pack(prefix: str, root: str, make_list: bool, exts: tuple[str, ...], chunks: int,
         train_ratio: float, test_ratio: float, recursive: bool, no_shuffle: bool,
         pass_through: bool, resize: int, center_crop: bool, quality: int, num_thread: int,
         color: str, encoding: str, pack_label: bool) -> None:
    """Pack an image tree into MXNet RecordIO (.lst/.rec/.idx), im2rec.py-compatible.

    \b
    Examples:
      clusterkit pack --list --recursive data/train /images/train
      clusterkit pack --resize 480 --quality 95 --num-thread 16 data/train /images/train
    """
    from clusterkit.dataset.codec import CodecOptions
    from clusterkit.dataset.listing import DEFAULT_EXTS, ListOptions
    from clusterkit.dataset.packer import PackOptions, do_pack

    ext_list = tuple(e for arg in exts for e in arg.split()) or DEFAULT_EXTS
    opts = PackOptions(
        prefix=prefix, root=root, make_list=make_list, num_thread=num_thread,
        lists=ListOptions(recursive=recursive, exts=ext_list, chunks=chunks,
                          train_ratio=train_ratio, test_ratio=test_ratio,
                          shuffle=not no_shuffle),
        codec=CodecOptions(resize=resize, center_crop=center_crop, quality=quality,
                           encoding=encoding, color=int(color), pass_through=pass_through,
                           pack_label=pack_label))
    ctx = get_ctx()
    with ConsoleReporter(ctx.err_console, unit="images") as report:
        summary = do_pack(opts, report)
    if ctx.json:
        print_json(summary.to_json())
    else:
        for directory, label in summary.classes:
            click.echo(f"{directory} {label}")


COMMANDS = [pack]
