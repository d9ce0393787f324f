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


# --- a shared spec's workdir: nothing outside it leaves the machine (issue 39) ---

def _home_with_credentials(tmp_path: Path) -> Path:
    """``tmp_path/home`` with ``.aws/credentials``, and a downloaded project at
    ``home/dl/proj`` (the spec's directory) whose ``src`` links to ``../../.aws``."""
    aws = tmp_path / "home" / ".aws"
    aws.mkdir(parents=True)
    (aws / "credentials").write_text("aws_secret_access_key = s3cret\n")
    proj = tmp_path / "home" / "dl" / "proj"
    proj.mkdir(parents=True)
    (proj / "src").symlink_to("../../.aws")
    return proj


def test_a_spec_workdir_linked_outside_the_spec_directory_is_refused(tmp_path: Path):
    proj = _home_with_credentials(tmp_path)
    with pytest.raises(UsageError) as err:
        workdir.plan(_spec(proj, "src"), None)
    assert err.value.exit_code == 2
    assert f"the link {proj / 'src'} points to '../../.aws'" in err.value.message
    assert str((tmp_path / "home" / ".aws").resolve()) in err.value.message
    assert "--workdir DIR" in (err.value.hint or "")


def test_a_link_at_any_level_of_the_spec_workdir_is_found(tmp_path: Path):
    proj = _home_with_credentials(tmp_path)
    (tmp_path / "elsewhere" / "code").mkdir(parents=True)
    (proj / "vendor").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UsageError, match=r"the link .*/proj/vendor points to "):
        workdir.plan(_spec(proj, "vendor/code"), None)
    with pytest.raises(UsageError, match="leads outside"):  # text `..`, no link
        workdir.plan(_spec(proj, "../../.aws"), None)


def test_a_spec_workdir_linked_inside_the_spec_directory_is_synced(tmp_path: Path):
    (tmp_path / "code").mkdir()
    (tmp_path / "src").symlink_to("code")
    synced = workdir.plan(_spec(tmp_path, "src"), None)
    assert synced is not None and synced.local == (tmp_path / "code").resolve()


def test_option_workdir_may_be_anywhere_but_its_links_may_not_lead_out(tmp_path: Path):
    proj = _home_with_credentials(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "train.py").write_text("")
    assert workdir.plan(_spec(proj), str(mine)) is not None  # the user's choice
    (mine / "creds").symlink_to(tmp_path / "home" / ".aws" / "credentials")
    with pytest.raises(UsageError) as err:
        workdir.files(mine)
    assert err.value.exit_code == 2
    assert f"the link {mine / 'creds'} points to " in err.value.message
    assert "credentials" in err.value.message and ".gitignore" in (err.value.hint or "")


def test_links_inside_the_tree_are_sent_as_links(tmp_path: Path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("x = 1\n")
    (tmp_path / "lib").symlink_to("pkg")
    (tmp_path / "alias.py").symlink_to("pkg/mod.py")
    names = workdir.files(tmp_path)
    assert names == ["alias.py", "lib", "pkg/mod.py"]
    with tarfile.open(fileobj=io.BytesIO(workdir.pack(tmp_path, names))) as tar:
        links = {m.name: m.linkname for m in tar.getmembers() if m.issym()}
    assert links == {"alias.py": "pkg/mod.py", "lib": "pkg"}


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def _repo(root: Path) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    _git(root, "init", "-q")
    (root / "train.py").write_text("print(1)\n")
    _git(root, "add", "train.py")
    return root


def test_a_tracked_link_out_of_a_git_workdir_is_refused_an_ignored_one_is_not(tmp_path: Path):
    repo = _repo(tmp_path / "repo")
    (tmp_path / "secret").write_text("s3cret")
    (repo / "out").symlink_to("../secret")
    with pytest.raises(UsageError, match=r"file 'out' leads outside .*points to '\.\./secret'"):
        workdir.files(repo)
    (repo / ".gitignore").write_text("out\n")
    assert workdir.files(repo) == [".gitignore", "train.py"]


def test_an_index_entry_under_a_link_out_is_refused(tmp_path: Path):
    """A shipped index can list ``keys/credentials`` while ``keys`` links to ~/.aws:
    the file would be read through the link."""
    repo = _repo(tmp_path / "repo")
    (repo / "keys").mkdir()
    (repo / "keys" / "credentials").write_text("placeholder")
    _git(repo, "add", "keys/credentials")
    (repo / "keys" / "credentials").unlink()
    (repo / "keys").rmdir()
    aws = tmp_path / ".aws"
    aws.mkdir()
    (aws / "credentials").write_text("s3cret")
    (repo / "keys").symlink_to(aws)
    with pytest.raises(UsageError, match=rf"the link {repo / 'keys'} points to "):
        workdir.files(repo)


def _fsmonitor_repo(tmp_path: Path) -> tuple[Path, Path]:
    """A repository whose .git/config sets core.fsmonitor to a program that creates
    ``marker``; plain git runs it on reading the index (asserted, so the test bites)."""
    repo = _repo(tmp_path / "repo")
    marker = tmp_path / "marker"
    hook = tmp_path / "hook.sh"
    hook.write_text(f"#!/bin/sh\ntouch {marker}\n")
    hook.chmod(0o755)
    _git(repo, "config", "core.fsmonitor", str(hook))
    _git(repo, "ls-files")
    assert marker.exists(), "this git does not run core.fsmonitor: the test proves nothing"
    marker.unlink()
    return repo, marker


def test_the_file_list_never_runs_a_repositorys_fsmonitor(tmp_path: Path):
    repo, marker = _fsmonitor_repo(tmp_path)
    assert workdir.files(repo) == ["train.py"]
    assert not marker.exists()


def test_the_file_list_ignores_the_users_git_variables(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    repo = _repo(tmp_path / "repo")
    other = _repo(tmp_path / "other")
    (other / "other.py").write_text("")
    _git(other, "add", "other.py")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_CONFIG_PARAMETERS", "'core.fsmonitor'='touch /nonexistent/x'")
    assert workdir.files(repo) == ["train.py"]
