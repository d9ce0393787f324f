"""`clusterkit pack` under write failures, through the real CLI in subprocesses.

A full disk is real: a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored, so the write
that crosses it fails with EFBIG) and a 256 KiB tmpfs (ENOSPC; root only, as in CI). A
*transient* failure is emulated by raising the child's limit again (prlimit) as soon as it
reports its first problem, the way a disk frees up while a pack is running.

Whatever fails, pack must exit 1 naming the file and the OS error, leave no temporary file,
and leave an earlier complete dataset at the same prefix byte-identical.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import support
from tests.unit.dataset_images import photo, write_image

IMAGE_COUNT = 1500  # .lst lines: several MiB of records, far over every limit below
FSIZE_LIMIT = 256 << 10
ENV = {**os.environ, "COLUMNS": "1000"}  # one error line, however long the path


def _limit(fsize: int) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, hard))


def pack_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "clusterkit", "pack", *args]



def run_pack(args: list[str], cwd: Path, fsize: int | None = None
             ) -> subprocess.CompletedProcess:
    return subprocess.run(pack_argv(*args), cwd=cwd, capture_output=True, text=True,
                          timeout=120, env=ENV,
                          preexec_fn=(lambda: _limit(fsize)) if fsize else None)


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def write_lst(path: Path, count: int) -> None:
    path.write_text("".join(f"{i}\t0.000000\timg.png\n" for i in range(count)))


@pytest.fixture(scope="module")
def images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("images")
    write_image(f"{root}/img.png", photo(64, 64, 1))
    return root


@pytest.fixture(scope="module")
def many_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A flat tree of 3000 (empty) .jpg files: a .lst of ~150 KiB. Listing never opens
    the files, so they need no content."""
    root = tmp_path_factory.mktemp("names")
    for i in range(3000):
        (root / f"image_{i:05d}_with_a_rather_long_name.jpg").touch()
    return root


@pytest.fixture(scope="module")
def few_names(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("few")
    for i in range(3):
        (root / f"f{i}.jpg").touch()
    return root


@pytest.fixture
def small_fs() -> Iterator[Path]:
    """A 256 KiB tmpfs, unmounted afterwards whatever happens."""
    support.require_root("mounting a tmpfs")
    point = Path(tempfile.mkdtemp(prefix="ck-pack-full-"))
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "ckfull", str(point)],
                   check=True)
    try:
        yield point
    finally:
        subprocess.run(["umount", str(point)], check=False)
        with contextlib.suppress(OSError):
            point.rmdir()


def _earlier_dataset(dest: Path, images: Path) -> dict[str, bytes]:
    """A complete small dataset at dest/out.*; then out.lst is replaced by a big list."""
    write_lst(dest / "out.lst", 5)
    proc = run_pack(["--pass-through", "out", str(images)], dest)
    assert proc.returncode == 0, proc.stderr
    before = snapshot(dest)
    assert sorted(before) == ["out.idx", "out.lst", "out.rec"]
    write_lst(dest / "out.lst", IMAGE_COUNT)
    before["out.lst"] = (dest / "out.lst").read_bytes()
    return before


def assert_failed_cleanly(proc: subprocess.CompletedProcess, path: Path, reason: str,
                          dest: Path, before: dict[str, bytes]) -> None:
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert f"cannot write {path}: {reason}" in proc.stderr, proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr
    assert "skipped" not in proc.stderr  # a write error is not a bad image
    assert snapshot(dest) == before  # no temp file; earlier files byte-identical


@pytest.mark.parametrize("earlier", [False, True], ids=["first-pack", "over-earlier"])
def test_pack_past_the_file_size_limit(images: Path, tmp_path: Path, earlier: bool) -> None:
    before = _earlier_dataset(tmp_path, images) if earlier else {}
    if not earlier:
        write_lst(tmp_path / "out.lst", IMAGE_COUNT)
        before = snapshot(tmp_path)
    proc = run_pack(["--pass-through", "out", str(images)], tmp_path, fsize=FSIZE_LIMIT)
    assert_failed_cleanly(proc, tmp_path / "out.rec", "File too large (EFBIG)", tmp_path,
                          before)


def test_transient_write_failure_is_not_skipped_over(images: Path, tmp_path: Path) -> None:
    """The limit is lifted as soon as pack reports anything after its start line: the old
    code took the failed write for a bad image, went on, and exited 0 with an .idx
    pointing past the .rec."""
    before = _earlier_dataset(tmp_path, images)
    proc = subprocess.Popen(pack_argv("--pass-through", "out", str(images)), cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=ENV, preexec_fn=lambda: _limit(FSIZE_LIMIT))
    assert proc.stderr is not None
    lines = [proc.stderr.readline()]
    if lines[0] == "out.lst\n":  # the list's start line (piped: no bar), before any write
        lines.append(proc.stderr.readline())
    with contextlib.suppress(OSError):  # it may have exited already: that is the fix
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE,
                         (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    lines += proc.stderr.readlines()
    proc.wait(timeout=120)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, "", "".join(lines))
    assert_failed_cleanly(done, tmp_path / "out.rec", "File too large (EFBIG)", tmp_path,
                          before)


@pytest.mark.parametrize("earlier", [False, True], ids=["first-pack", "over-earlier"])
def test_pack_on_a_full_file_system(images: Path, small_fs: Path, earlier: bool) -> None:
    if earlier:
        before = _earlier_dataset(small_fs, images)
    else:
        write_lst(small_fs / "out.lst", IMAGE_COUNT)
        before = snapshot(small_fs)
    proc = run_pack(["--pass-through", "out", str(images)], small_fs)
    assert_failed_cleanly(proc, small_fs / "out.rec", "No space left on device (ENOSPC)",
                          small_fs, before)


def _earlier_list(dest: Path, few_names: Path) -> dict[str, bytes]:
    proc = run_pack(["--list", "out", str(few_names)], dest)
    assert proc.returncode == 0, proc.stderr
    return snapshot(dest)


@pytest.mark.parametrize("earlier", [False, True], ids=["first-list", "over-earlier"])
def test_list_past_the_file_size_limit(many_names: Path, few_names: Path, tmp_path: Path,
                                       earlier: bool) -> None:
    before = _earlier_list(tmp_path, few_names) if earlier else {}
    proc = run_pack(["--list", "out", str(many_names)], tmp_path, fsize=16 << 10)
    assert_failed_cleanly(proc, tmp_path / "out.lst", "File too large (EFBIG)", tmp_path,
                          before)


@pytest.mark.parametrize("earlier", [False, True], ids=["first-list", "over-earlier"])
def test_list_on_a_full_file_system(many_names: Path, few_names: Path, small_fs: Path,
                                    earlier: bool) -> None:
    _earlier_list(small_fs, few_names) if earlier else None
    vfs = os.statvfs(small_fs)
    (small_fs / "filler").write_bytes(b"x" * (vfs.f_bavail * vfs.f_frsize - (120 << 10)))
    before = snapshot(small_fs)  # room for one ~80 KiB chunk, not for both
    proc = run_pack(["--list", "--chunks", "2", "out", str(many_names)], small_fs)
    assert_failed_cleanly(proc, small_fs / "out_1.lst", "No space left on device (ENOSPC)",
                          small_fs, before)  # the complete first chunk not renamed either


@pytest.mark.parametrize("mode", ["list", "pack"])
def test_unwritable_destination(images: Path, small_fs: Path, mode: str) -> None:
    """A read-only file system (EROFS) stands for any refused write (EACCES as a user)."""
    before = _earlier_dataset(small_fs, images)
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    args = ["--list", "out", str(images)] if mode == "list" else ["out", str(images)]
    proc = run_pack(args, small_fs)
    target = small_fs / ("out.lst" if mode == "list" else "out.rec")
    assert_failed_cleanly(proc, target, "Read-only file system (EROFS)", small_fs, before)


def test_unwritable_directory_as_a_user(images: Path, tmp_path: Path) -> None:
    """EACCES: a directory the packing user may not write. Root writes through directory
    permissions, so as root (CI) the pack runs without the capabilities that allow it
    (util-linux `setpriv` drops CAP_DAC_OVERRIDE from the bounding set)."""
    dest = tmp_path / "dest"
    dest.mkdir()
    dest.chmod(0o555)
    argv = pack_argv("--list", "out", str(images))
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set", "-dac_override", *argv]
    try:
        proc = subprocess.run(argv, cwd=dest, capture_output=True, text=True, timeout=120,
                              env=ENV)
    finally:
        dest.chmod(0o755)
    assert_failed_cleanly(proc, dest / "out.lst", "Permission denied (EACCES)", dest, {})
