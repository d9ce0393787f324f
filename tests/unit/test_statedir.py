"""The state directory gate: per-cluster paths only for cluster names, and only inside
``<state>/clusters/`` (no ``..``, no absolute path, no symlink pointing out)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clusterkit import statedir
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.remote import known_hosts

BAD_NAMES = ["../..", "..", ".", "a/b", "/some/dir", "~", "~root", "-x", "x-", "", "a b",
             "a_b", "a.b", "1abc", "a" * 64, "x\n", "Ünïcode"]
GOOD_NAMES = ["a", "imagenet", "Train-2", "a" * 63, "x1-y2"]


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    state = tmp_path / "state"
    monkeypatch.setenv(statedir.HOME_ENV, str(state))
    return state


def test_state_dir_env_and_default(tmp_path, monkeypatch):
    monkeypatch.setenv(statedir.HOME_ENV, str(tmp_path / "ck"))
    assert statedir.state_dir() == tmp_path / "ck"
    monkeypatch.delenv(statedir.HOME_ENV)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert statedir.state_dir() == tmp_path / ".clusterkit"
    assert statedir.clusters_dir() == tmp_path / ".clusterkit" / "clusters"


@pytest.mark.parametrize("name", GOOD_NAMES)
def test_cluster_names_follow_the_spec_rule(home, name):
    assert statedir.check_name(name) == name
    assert statedir.cluster_dir(name) == home / "clusters" / name


@pytest.mark.parametrize("name", BAD_NAMES, ids=repr)
def test_anything_else_is_not_a_cluster_name(home, name):
    with pytest.raises(UsageError, match="not a cluster name") as info:
        statedir.cluster_dir(name)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("name", ["../..", "..", "a/b", "/some/dir"])
def test_forget_with_a_path_deletes_nothing(home, tmp_path, name):
    """Before: shutil.rmtree(<state>/clusters/NAME) with NAME taken as given."""
    sentinel = tmp_path / "some" / "dir"
    sentinel.mkdir(parents=True)
    (home / "clusters" / "a" / "b").mkdir(parents=True)
    arg = str(sentinel) if name == "/some/dir" else name
    with pytest.raises(UsageError):
        known_hosts.forget(arg)
    assert sentinel.is_dir() and (home / "clusters" / "a" / "b").is_dir() and home.is_dir()


def test_a_symlink_pointing_out_is_refused_and_never_deleted(home, tmp_path):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "file").write_text("keep me")
    (home / "clusters").mkdir(parents=True)
    link = home / "clusters" / "x"
    link.symlink_to(outside, target_is_directory=True)
    with pytest.raises(ClusterkitError, match="outside clusterkit's state directory"):
        statedir.cluster_dir("x")
    with pytest.raises(ClusterkitError):
        known_hosts.forget("x")
    with pytest.raises(ClusterkitError):
        known_hosts.record("x", {"127.0.0.2": "ssh-ed25519 AAAA"})
    assert (outside / "file").read_text() == "keep me"
    assert link.is_symlink()


def test_forget_removes_a_cluster_dir_and_only_the_link_inside(home):
    known_hosts.record("c1", {"127.0.0.2": "ssh-ed25519 AAAA"})
    assert known_hosts.known_hosts_path("c1").is_file()
    known_hosts.forget("c1")
    assert not (home / "clusters" / "c1").exists()
    known_hosts.forget("c1")  # nothing there: fine
    target = home / "clusters" / "real"
    target.mkdir()
    (home / "clusters" / "alias").symlink_to(target, target_is_directory=True)
    assert statedir.remove_cluster_dir("alias") is True
    assert target.is_dir() and not (home / "clusters" / "alias").exists()


# --- the state directory is the user's alone -----------------------------------------

def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_state_dirs_are_0700_however_they_were_made(home):
    """A state root left 0755 (by an older clusterkit, the sandbox, a umask) is
    tightened at the next write; every level below it is made 0700 and files 0600."""
    home.mkdir(mode=0o755)
    (home / "clusters").mkdir(mode=0o755)
    home.chmod(0o755)
    (home / "clusters").chmod(0o777)
    path = known_hosts.record("c1", {"127.0.0.2": "ssh-ed25519 AAAA"})
    assert [_mode(p) for p in (home, home / "clusters", path.parent)] == [0o700] * 3
    assert _mode(path) == 0o600
    known_hosts.record_instances("c1", {"i-0123456789abcdef0": "ssh-ed25519 AAAA"})
    assert _mode(known_hosts.host_keys_path("c1")) == 0o600


def test_a_fresh_state_root_is_made_0700(home):
    old = os.umask(0o022)
    try:
        folder = statedir.ensure_cluster_dir("fresh")
    finally:
        os.umask(old)
    assert folder == home / "clusters" / "fresh"
    assert [_mode(p) for p in (home, home / "clusters", folder)] == [0o700] * 3


def test_a_state_dir_of_another_user_is_refused(tmp_path, monkeypatch):
    """Root here can hand a directory to nobody; anyone else finds / owned by root."""
    if os.getuid() == 0:
        foreign = tmp_path / "foreign"
        foreign.mkdir(mode=0o755)
        os.chown(foreign, 65534, 65534)
    else:
        foreign = Path("/")
    monkeypatch.setenv(statedir.HOME_ENV, str(foreign))
    with pytest.raises(ClusterkitError, match="belongs to user id") as caught:
        statedir.ensure_cluster_dir("c1")
    assert statedir.HOME_ENV in caught.value.hint
    assert _mode(foreign) == 0o755 or foreign == Path("/")


def test_write_private_leaves_no_temp_file_on_failure(home):
    folder = statedir.ensure_cluster_dir("c1")
    statedir.write_private(folder / "f", "one\n")
    with pytest.raises(TypeError):
        statedir.write_private(folder / "f", None)  # type: ignore[arg-type]
    assert (folder / "f").read_text() == "one\n"
    assert sorted(p.name for p in folder.iterdir()) == ["f"]
