"""pack's outputs and their errors through the CLI (in-process): an empty image tree is a
usage error, a missing destination directory a write error naming the file, and the
writers' temporary files are gone either way. Disk-full and file-size limits are in
tests/integration/test_pack_disk_full.py."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.dataset.atomic import output_error
from clusterkit.dataset.recordio import IndexedRecordWriter, read_index

WIDE = {"COLUMNS": "1000"}  # rich wraps error lines at 80 columns otherwise


def pack(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["pack", *args], env=WIDE)
    return result.exit_code, result.stderr


@pytest.mark.parametrize("recursive", [[], ["--recursive"]], ids=["flat", "recursive"])
def test_tree_without_images_is_a_usage_error(tmp_path: Path, recursive: list[str]) -> None:
    root = tmp_path / "img"
    (root / "sub").mkdir(parents=True)
    (root / "notes.txt").write_text("no image")
    (root / "sub" / "a.gif").write_bytes(b"GIF89a")
    code, err = pack("--list", *recursive, str(tmp_path / "out"), str(root))
    assert code == 2, err
    assert f"no images under {root}" in err
    assert "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["img"]


def test_missing_destination_directory_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    (tmp_path / "img" / "a.jpg").touch()
    out = tmp_path / "nope" / "out"
    code, err = pack("--list", str(out), str(tmp_path / "img"))
    assert code == 1, err
    assert f"cannot write {out}.lst: No such file or directory (ENOENT)" in err
    assert "unexpected" not in err


def test_pack_mode_with_a_missing_directory_finds_no_list(tmp_path: Path) -> None:
    (tmp_path / "img").mkdir()
    code, err = pack(str(tmp_path / "nope" / "out"), str(tmp_path / "img"))
    assert code == 2, err
    assert "no .lst file found" in err and "unexpected" not in err


def test_output_error_names_file_and_os_error() -> None:
    err = output_error("/d/out.rec", OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)))
    assert err.exit_code == 1
    assert err.message == "cannot write /d/out.rec: No space left on device (ENOSPC)"
    assert "unchanged" in (err.hint or "")


def test_writer_finish_then_commit_and_abort_after_commit(tmp_path: Path) -> None:
    """finish() fsyncs and closes under the temporary names; commit() renames; a later
    abort() (the all-or-nothing cleanup of several writers) leaves committed files alone."""
    rec, idx = str(tmp_path / "a.rec"), str(tmp_path / "a.idx")
    writer = IndexedRecordWriter(idx, rec)
    writer.write_idx(3, b"abc")
    writer.finish()
    assert sorted(os.listdir(tmp_path)) == sorted([f"a.idx.tmp-{os.getpid()}",
                                                   f"a.rec.tmp-{os.getpid()}"])
    writer.commit()
    writer.abort()
    assert sorted(os.listdir(tmp_path)) == ["a.idx", "a.rec"]
    assert read_index(idx) == [(3, 0)]
