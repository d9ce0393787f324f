"""dataset.manifest: the tree rule, hashing, the stable JSON format, the digest, check()."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from clusterkit.dataset import manifest as mf
from clusterkit.errors import UsageError


def _tree(root: Path) -> Path:
    (root / "sub" / "deep").mkdir(parents=True)
    (root / "b.rec").write_bytes(b"x" * 1000)
    (root / "a.idx").write_bytes(b"0\t0\n")
    (root / "sub" / "deep" / "c.lst").write_bytes(b"")
    (root / "empty-dir").mkdir()
    return root


def test_build_lists_every_file_sorted_with_size_and_sha(tmp_path: Path) -> None:
    m = mf.build(_tree(tmp_path))
    assert [f.path for f in m.files] == ["a.idx", "b.rec", "sub/deep/c.lst"]
    assert m.files[1].size == 1000
    assert m.files[1].sha256 == hashlib.sha256(b"x" * 1000).hexdigest()
    assert m.total_bytes == 1004


def test_json_format_is_stable_and_the_digest_is_of_the_canonical_json(tmp_path: Path) -> None:
    m = mf.build(_tree(tmp_path))
    data = json.loads(m.canonical())
    assert set(data) == {"version", "files", "total_bytes"}
    assert data["version"] == 1
    assert set(data["files"][0]) == {"path", "size", "sha256"}
    assert m.canonical() == json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    assert m.digest == hashlib.sha256(m.canonical()).hexdigest()
    assert mf.parse(m.canonical()) == m


def test_written_manifest_is_skipped_by_the_next_walk(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    first = mf.build(root)
    path = mf.write(root, first)
    assert path.name == mf.MANIFEST_NAME and path.read_bytes() == first.canonical()
    assert mf.build(root) == first
    assert not list(root.glob("*.tmp-*"))


def test_digest_changes_with_one_byte(tmp_path: Path) -> None:
    root = _tree(tmp_path)
    before = mf.build(root).digest
    (root / "b.rec").write_bytes(b"x" * 999 + b"y")
    assert mf.build(root).digest != before


@pytest.mark.parametrize("make", ["symlink", "fifo"])
def test_symlinks_and_special_files_are_refused(tmp_path: Path, make: str) -> None:
    root = _tree(tmp_path)
    bad = root / "sub" / "bad"
    if make == "symlink":
        bad.symlink_to(root / "b.rec")
    else:
        os.mkfifo(bad)
    with pytest.raises(UsageError, match="sub/bad"):
        mf.walk(root)


def test_parse_rejects_other_versions_and_bad_totals() -> None:
    with pytest.raises(ValueError, match="version"):
        mf.parse('{"version": 2, "files": [], "total_bytes": 0}')
    with pytest.raises(ValueError, match="total_bytes"):
        mf.parse('{"version": 1, "files": [{"path": "a", "size": 3, "sha256": "x"}], '
                 '"total_bytes": 4}')
    with pytest.raises(ValueError):
        mf.parse("[]")


def test_check_reports_missing_size_sha_and_extra() -> None:
    m = mf.Manifest((mf.FileEntry("a", 1, "aa"), mf.FileEntry("b", 2, "bb"),
                     mf.FileEntry("c", 3, "cc"), mf.FileEntry("d", 4, "dd")))
    observed = {"b": mf.Observed(5), "c": mf.Observed(3, "zz"), "d": mf.Observed(4),
                "e": mf.Observed(1)}
    found = mf.check(m, observed)
    assert [(x.path, x.problem) for x in found] == [
        ("a", mf.Problem.MISSING), ("b", mf.Problem.SIZE), ("c", mf.Problem.SHA256),
        ("e", mf.Problem.EXTRA)]
    assert str(found[1]) == "b: size differs (expected 2, found 5)"
    assert mf.check(m, {f.path: mf.Observed(f.size, f.sha256) for f in m.files}) == []
