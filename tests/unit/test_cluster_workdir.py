"""cluster/jobs/workdir.py: which local files `train` ships, and where they land."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

import pytest

from clusterkit.cluster.jobs import workdir
from clusterkit.errors import UsageError
from clusterkit.spec.model import Efs, Spec, Storage, Train


def _spec(tmp_path: Path, train_workdir: str = "~", efs: bool = False) -> Spec:
    return Spec(name="c1", region="us-east-1", regions=("us-east-1",), nodes=None,  # type: ignore[arg-type]
                ssh=None, storage=Storage(efs=Efs() if efs else None),  # type: ignore[arg-type]
                train=Train(workdir=train_workdir), tags={}, file=str(tmp_path / "c.yaml"))


def test_git_tree_ships_tracked_and_untracked_but_not_ignored_nor_dot_git(tmp_path: Path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text("data/\n*.ckpt\n")
    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "m.ckpt").write_text("big")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.rec").write_text("rec")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("")
    assert workdir.files(tmp_path) == [".gitignore", "pkg/mod.py", "train.py"]


def test_plain_directory_ships_everything_but_dot_git(tmp_path: Path):
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("x")
    (tmp_path / "a.py").write_text("")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.txt").write_text("")
    assert workdir.files(tmp_path) == ["a.py", "sub/b.txt"]


def test_pack_holds_the_files_owner_neutral(tmp_path: Path):
    (tmp_path / "a.py").write_text("hello")
    data = workdir.pack(tmp_path, ["a.py"])
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        (member,) = tar.getmembers()
        assert (member.name, member.uid, member.uname) == ("a.py", 0, "")
        assert tar.extractfile(member).read() == b"hello"  # type: ignore[union-attr]


def test_only_option_or_relative_workdir_is_synced(tmp_path: Path):
    assert workdir.plan(_spec(tmp_path), None) is None  # "~": a node directory
    assert workdir.plan(_spec(tmp_path, "/efs/project"), None) is None
    (tmp_path / "src").mkdir()
    rel = workdir.plan(_spec(tmp_path, "src"), None)
    assert rel == workdir.Workdir(tmp_path / "src", "$HOME/clusterkit-work/c1", False)
    shared = workdir.plan(_spec(tmp_path, efs=True), str(tmp_path / "src"))
    assert shared == workdir.Workdir(tmp_path / "src", "/efs/clusterkit/c1/work", True)
    with pytest.raises(UsageError, match="not a directory"):
        workdir.plan(_spec(tmp_path), str(tmp_path / "missing"))


def test_extract_command_swaps_in_a_fresh_copy(tmp_path: Path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "new.py").write_text("new")
    target = tmp_path / "remote" / "work"
    target.mkdir(parents=True)
    (target / "stale.py").write_text("old")
    data = workdir.pack(tmp_path / "src", ["new.py"])
    cmd = workdir.extract_command(str(target), "j-20250101-120000-ab12")
    out = subprocess.run(["sh", "-c", cmd], input=data, capture_output=True, check=True)
    assert out.stdout.decode().strip() == str(target)
    assert sorted(p.name for p in target.iterdir()) == ["new.py"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["work"]
