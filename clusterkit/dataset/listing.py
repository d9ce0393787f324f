"""`.lst` files exactly as im2rec.py makes and reads them.

Order, labels, the seed-100 shuffle, chunk and train/val/test splitting follow im2rec.py
line by line, so the same tree gives byte-identical `.lst` files. Differences, on purpose:
``--exts`` given on the command line are matched case-insensitively too; a directory
symlink loop is walked once instead of forever; names that are not valid UTF-8 round-trip
(surrogateescape) instead of crashing; a path keeps leading/trailing spaces.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from clusterkit.dataset.atomic import TempOutput, publish
from clusterkit.errors import UsageError

DEFAULT_EXTS = (".jpeg", ".jpg", ".png")
SHUFFLE_SEED = 100
SkipReport = Callable[[str, str], None]  # (path, why) of a directory left out


@dataclass(frozen=True)
class Item:
    """One `.lst` line: index, relative path, label(s)."""

    index: int
    path: str
    labels: tuple[float, ...]


@dataclass(frozen=True)
class ListOptions:
    recursive: bool = False
    exts: tuple[str, ...] = DEFAULT_EXTS
    chunks: int = 1
    train_ratio: float = 1.0
    test_ratio: float = 0.0
    shuffle: bool = True


def _walk(root: str, on_skip: SkipReport) -> Iterator[tuple[str, list[str]]]:
    """os.walk(root, followlinks=True) with sorted dirs/files, minus symlink cycles; a
    directory that cannot be read goes to ``on_skip`` (os.walk alone drops it silently)."""
    chains: dict[str, frozenset[tuple[int, int]]] = {}

    def unreadable(exc: OSError) -> None:
        on_skip(exc.filename or root, exc.strerror or str(exc))

    for path, dirs, files in os.walk(root, followlinks=True, onerror=unreadable):
        st = os.stat(path)
        parent = chains.get(os.path.dirname(path), frozenset())
        chain = chains[path] = parent | {(st.st_dev, st.st_ino)}
        dirs.sort()
        files.sort()
        for name in list(dirs):
            try:
                sub = os.stat(os.path.join(path, name))
            except OSError:
                continue
            if (sub.st_dev, sub.st_ino) in chain:
                dirs.remove(name)  # a loop back to an ancestor
        yield path, files


def _ignore(_path: str, _why: str) -> None:
    pass


def list_images(root: str, recursive: bool, exts: Sequence[str] = DEFAULT_EXTS,
                on_skip: SkipReport = _ignore) -> tuple[list[Item], list[tuple[str, int]]]:
    """Images under ``root`` in im2rec order and the (class dir, label) map.

    Recursive: each directory holding at least one image gets the next label, in walk
    order; a subdirectory that cannot be read is reported to ``on_skip`` (path, why).
    Flat: only files directly in ``root``, label 0.
    """
    wanted = {e.lower() for e in exts}
    items: list[Item] = []
    if not recursive:
        for name in sorted(os.listdir(root)):
            fpath = os.path.join(root, name)
            if os.path.isfile(fpath) and os.path.splitext(name)[1].lower() in wanted:
                items.append(Item(len(items), os.path.relpath(fpath, root), (0.0,)))
        return items, []
    classes: dict[str, int] = {}
    for path, files in _walk(root, on_skip):
        for name in files:
            fpath = os.path.join(path, name)
            if os.path.splitext(name)[1].lower() in wanted and os.path.isfile(fpath):
                label = classes.setdefault(path, len(classes))
                items.append(Item(len(items), os.path.relpath(fpath, root), (float(label),)))
    return items, [(os.path.relpath(k, root), v) for k, v in classes.items()]


def format_item(item: Item) -> str:
    labels = "".join(f"{label:f}\t" for label in item.labels)
    return f"{item.index:d}\t{labels}{item.path}\n"


def _encode(items: Sequence[Item]) -> Iterator[bytes]:
    for item in items:
        yield format_item(item).encode("utf-8", "surrogateescape")


def write_lists(files: Sequence[tuple[str, Sequence[Item]]]) -> None:
    """Write `.lst` files all or nothing: each under a temporary name, flushed and fsynced,
    and renamed into place only when every one is complete. On any error (disk full,
    Ctrl-C) the temporary files are removed and earlier lists are left as they were."""
    outputs: list[TempOutput] = []
    try:
        for path, items in files:
            outputs.append(TempOutput(path))
            for line in _encode(items):
                outputs[-1].write(line)
            outputs[-1].finish()
        publish(outputs)
    except BaseException:
        for out in outputs:
            out.discard()
        raise


def write_list(path: str, items: Sequence[Item]) -> None:
    """Write one `.lst` (via a temporary name, so a failure leaves no half list)."""
    write_lists([(path, items)])


def split_lists(prefix: str, items: list[Item], opts: ListOptions) -> list[tuple[str, list[Item]]]:
    """(file name, items) of every `.lst` im2rec's make_list writes, in its write order."""
    if opts.shuffle:
        items = list(items)
        random.Random(SHUFFLE_SEED).shuffle(items)
    n = len(items)
    chunk_size = (n + opts.chunks - 1) // opts.chunks
    out: list[tuple[str, list[Item]]] = []
    for i in range(opts.chunks):
        chunk = items[i * chunk_size:(i + 1) * chunk_size]
        name = prefix + (f"_{i:d}" if opts.chunks > 1 else "")
        sep = int(chunk_size * opts.train_ratio)
        sep_test = int(chunk_size * opts.test_ratio)
        if opts.train_ratio == 1.0:
            out.append((name + ".lst", chunk))
            continue
        if opts.test_ratio:
            out.append((name + "_test.lst", chunk[:sep_test]))
        if opts.train_ratio + opts.test_ratio < 1.0:
            out.append((name + "_val.lst", chunk[sep_test + sep:]))
        out.append((name + "_train.lst", chunk[sep_test:sep_test + sep]))
    return out


def make_lists(prefix: str, root: str, opts: ListOptions,
               on_skip: SkipReport = _ignore) -> tuple[list[str], list[tuple[str, int]]]:
    """im2rec ``--list``: write the `.lst` file(s); return their paths and the class map."""
    try:
        items, classes = list_images(root, opts.recursive, opts.exts, on_skip)
    except PermissionError as exc:
        raise UsageError(f"cannot read the image root {root}: {exc.strerror}",
                         "give a directory you can read") from exc
    if not items:
        where = "in it or any subdirectory" if opts.recursive else (
            "directly in it (add --recursive to walk subdirectories)")
        raise UsageError(f"no images under {root}",
                         f"looked for {' '.join(opts.exts)} files {where}")
    files = split_lists(prefix, items, opts)
    write_lists(files)
    return [path for path, _ in files], classes


def parse_line(line: str) -> Item | str:
    """An Item, or why the line is unusable (im2rec's read_list rules)."""
    fields = line.rstrip("\r\n").strip("\t\r\n\x0b\x0c").split("\t")
    if len(fields) < 3:
        return f"lst line should have at least three tab-separated parts, has {len(fields)}"
    try:
        index = int(fields[0].strip())
        labels = tuple(float(f.strip()) for f in fields[1:-1])
    except ValueError as exc:
        return f"cannot parse lst line: {exc}"
    path = fields[-1] if fields[-1].strip() else ""
    if not path:
        return "lst line has an empty path"
    return Item(index, path, labels)


def read_list(path: str) -> Iterator[tuple[int, Item | str]]:
    """(line number, Item or error text) for every line of a `.lst` file."""
    with open(path, encoding="utf-8", errors="surrogateescape", newline="\n") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                yield lineno, parse_line(line)
            elif line:
                yield lineno, "empty lst line"
