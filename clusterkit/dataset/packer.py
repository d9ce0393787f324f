"""`clusterkit pack`: im2rec.py's list and pack modes, with a parallel, ordered pipeline.

Pack mode reads `.lst` items in order, hands each to a pool of ``num_thread`` threads
(OpenCV releases the GIL, so nothing is pickled or copied between processes) and writes the
finished records from this thread in `.lst` order, so the output does not depend on the
thread count. At most ``WINDOW_PER_THREAD * num_thread`` items are in flight: memory stays
bounded whatever the dataset size.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field

import cv2

from clusterkit.dataset.codec import CodecOptions, make_record
from clusterkit.dataset.listing import Item, ListOptions, make_lists, read_list
from clusterkit.dataset.recordio import IndexedRecordWriter
from clusterkit.errors import UsageError
from clusterkit.events import Event, Kind, Reporter, Stage, null_reporter

WINDOW_PER_THREAD = 32
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc mallopt parameters


@dataclass(frozen=True)
class PackOptions:
    prefix: str
    root: str
    make_list: bool = False
    lists: ListOptions = field(default_factory=ListOptions)
    codec: CodecOptions = field(default_factory=CodecOptions)
    num_thread: int = 1


@dataclass
class ListResult:
    """One `.lst` packed: where the records went, how many, which items were skipped."""

    lst: str
    rec: str
    idx: str
    packed: int = 0
    bad: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class PackSummary:
    lists: list[str] = field(default_factory=list)
    classes: list[tuple[str, int]] = field(default_factory=list)
    packed: list[ListResult] = field(default_factory=list)

    @property
    def bad_count(self) -> int:
        return sum(len(r.bad) for r in self.packed)

    def to_json(self) -> dict:
        return {
            "lists": self.lists,
            "classes": [{"dir": d, "label": v} for d, v in self.classes],
            "records": [{"lst": r.lst, "rec": r.rec, "idx": r.idx, "packed": r.packed,
                         "seconds": round(r.seconds, 3),
                         "bad": [{"path": p, "reason": why} for p, why in r.bad]}
                        for r in self.packed],
        }


def tune_malloc() -> None:
    """Keep glibc from mmap/munmap-ing every decoded image (1 MB+ each).

    By default each such buffer is a fresh mmap, and its pages are faulted in and zeroed by
    the kernel on every image: about a quarter of the CPU time of a pack went to that.
    Raising the mmap and trim thresholds lets freed buffers be reused instead. No effect
    (and no harm) on a C library without mallopt.
    """
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_MMAP_THRESHOLD, 64 << 20)
        libc.mallopt(M_TRIM_THRESHOLD, 256 << 20)
    except (OSError, AttributeError):
        pass


def find_lists(prefix: str) -> tuple[str, list[str]]:
    """im2rec's rule: every `*.lst` file in the prefix's directory whose path starts with it."""
    working_dir = prefix if os.path.isdir(prefix) else os.path.dirname(prefix)
    found: list[str] = []
    if not os.path.isdir(working_dir):
        return working_dir, found
    for name in sorted(os.listdir(working_dir)):
        path = os.path.join(working_dir, name)
        if os.path.isfile(path) and path.startswith(prefix) and path.endswith(".lst"):
            found.append(path)
    return working_dir, found


def _count_lines(path: str) -> int:
    with open(path, "rb") as fh:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))


def _drain(pending: deque[tuple[Item, Future]], writer: IndexedRecordWriter, result: ListResult,
           report: Callable[[str, str], None], root: str) -> None:
    item, fut = pending.popleft()
    try:
        pieces = fut.result()
    except Exception as exc:  # BadImage, or any OpenCV surprise: one bad image never stops a run
        path = os.path.join(root, item.path)
        result.bad.append((path, str(exc) or type(exc).__name__))
        report(path, str(exc) or type(exc).__name__)
        return
    writer.write_framed(item.index, pieces)  # a write error (disk full...) stops the run
    result.packed += 1


def pack_list(lst: str, writer: IndexedRecordWriter, root: str, codec: CodecOptions,
              num_thread: int, report: Callable[[str, str], None],
              advance: Callable[[int], None] = lambda n: None) -> ListResult:
    """Pack one `.lst` through ``writer`` (the caller commits or aborts it)."""
    result = ListResult(lst, writer.rec_path, writer.idx_path)
    window = max(1, num_thread) * WINDOW_PER_THREAD
    start = time.perf_counter()
    pending: deque[tuple[Item, Future]] = deque()
    with ThreadPoolExecutor(max(1, num_thread), thread_name_prefix="pack") as pool:
        try:
            for lineno, entry in read_list(lst):
                if isinstance(entry, str):
                    result.bad.append((f"{lst}:{lineno}", entry))
                    report(f"{lst}:{lineno}", entry)
                    advance(1)
                    continue
                pending.append((entry, pool.submit(make_record, root, entry, codec)))
                if len(pending) >= window:
                    _drain(pending, writer, result, report, root)
                    advance(1)
            while pending:
                _drain(pending, writer, result, report, root)
                advance(1)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    writer.finish()
    result.seconds = time.perf_counter() - start
    return result


def _advance(report: Reporter, name: str, total: int) -> Callable[[int], None]:
    """A PROGRESS event (items done of ``total``) for each step of one list."""
    done = 0

    def advance(n: int) -> None:
        nonlocal done
        done += n
        report(Event(Kind.PROGRESS, name, stage=Stage.PACK, done=done, total=total))

    return advance


def _pack_all(opts: PackOptions, report: Reporter, summary: PackSummary) -> None:
    working_dir, lists = find_lists(opts.prefix)
    if not lists:
        raise UsageError(f"no .lst file found with prefix {opts.prefix}",
                         "make one first with `clusterkit pack --list PREFIX ROOT`")
    tune_malloc()
    cv2.setNumThreads(1)  # parallelism comes from the pool; OpenCV's own threads only contend

    def skipped(path: str, why: str) -> None:
        report(Event(Kind.WARNING, f"skipped {path}: {why}", stage=Stage.PACK))

    writers: list[IndexedRecordWriter] = []
    try:  # all or nothing: every .rec/.idx is renamed into place only when all are complete
        for lst in lists:
            base = os.path.join(working_dir, os.path.splitext(os.path.basename(lst))[0])
            writers.append(IndexedRecordWriter(base + ".idx", base + ".rec"))
            name, total = os.path.basename(lst), _count_lines(lst)
            report(Event(Kind.STAGE_STARTED, name, stage=Stage.PACK, total=total))
            result = pack_list(lst, writers[-1], opts.root, opts.codec, opts.num_thread,
                               skipped, _advance(report, name, total))
            summary.packed.append(result)
            rate = result.packed / result.seconds if result.seconds else 0.0
            report(Event(Kind.STAGE_DONE, f"{result.rec}: {result.packed} images in "
                         f"{result.seconds:.1f}s ({rate:,.0f} images/s), "
                         f"{len(result.bad)} skipped", stage=Stage.PACK))
        for writer in writers:
            writer.commit()
    except BaseException:
        for writer in writers:
            writer.abort()
        raise


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """Turn SIGTERM into SystemExit(143) while packing, so it unwinds like Ctrl-C does: the
    temporary `.rec`/`.idx`/`.lst` files are deleted instead of left behind. (Python's
    default for SIGTERM is to die on the spot.) Only the main thread can set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: object) -> None:
        os.write(2, b"\nterminated\n")
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def do_pack(opts: PackOptions, report: Reporter = null_reporter) -> PackSummary:
    """im2rec.py `--list` (write `.lst` files) or pack mode (every matching `.lst` -> .rec/.idx).
    Progress, skipped images and per-list results go to ``report`` as events."""
    check_options(opts)
    opts = _absolute(opts)
    if not os.path.isdir(opts.root):
        raise UsageError(f"image root {opts.root} is not a directory")
    summary = PackSummary()

    def skipped_dir(path: str, why: str) -> None:
        report(Event(Kind.WARNING, f"skipped directory {path}: {why}", stage=Stage.PACK))

    with sigterm_unwinds():
        if opts.make_list:
            summary.lists, summary.classes = make_lists(opts.prefix, opts.root, opts.lists,
                                                        skipped_dir)
        else:
            _pack_all(opts, report, summary)
    if opts.make_list:
        for path in summary.lists:
            report(Event(Kind.INFO, f"wrote {path} ({_count_lines(path)} images)"))
        return summary
    bad = summary.bad_count
    report(Event(Kind.INFO, f"{bad or 'no'} bad file{'s' if bad != 1 else ''} skipped in total"))
    return summary


def check_options(opts: PackOptions) -> None:
    """Refuse what im2rec.py would take and do something surprising with (exit 2)."""
    if opts.prefix.endswith(("/", os.sep)) or not os.path.basename(opts.prefix):
        raise UsageError(f"PREFIX {opts.prefix!r} names a directory: the files would be "
                         f"hidden ones like {opts.prefix.rstrip('/')}/.lst",
                         "PREFIX is a path and a file name stem, e.g. "
                         f"{opts.prefix.rstrip('/') or '.'}/train")
    lists = opts.lists
    for name, value in (("--train-ratio", lists.train_ratio), ("--test-ratio", lists.test_ratio)):
        if not 0.0 <= value <= 1.0:
            raise UsageError(f"{name} {value:g} is outside 0-1", "a fraction of the images")
    if lists.train_ratio < 1.0 and lists.train_ratio + lists.test_ratio > 1.0:
        raise UsageError(f"--train-ratio {lists.train_ratio:g} and --test-ratio "
                         f"{lists.test_ratio:g} add up to more than 1",
                         "the rest after train and test is the validation list")
    if not 1 <= opts.codec.quality <= 100:
        raise UsageError(f"--quality {opts.codec.quality} is outside 1-100",
                         "JPEG quality 1-100 (PNG: compression 1-9)")


def _absolute(opts: PackOptions) -> PackOptions:
    from dataclasses import replace

    return replace(opts, prefix=os.path.abspath(opts.prefix), root=os.path.abspath(opts.root))
