"""remote/sshhosts.py: the cluster's host entries for the user's own ssh (`ssh NAME`,
`ssh NAME-worker-N` through the master), the one Include line for ~/.ssh/config, and
values that could add directives refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterkit.errors import UsageError
from clusterkit.remote import sshhosts
from clusterkit.remote.connect import Login


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path / "ck"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def blocks(text: str) -> dict[str, list[str]]:
    """Host -> its directive lines (stripped)."""
    out: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line.startswith("Host "):
            current = line.split()[1]
            out[current] = []
        elif current and line.strip() and not line.startswith("#"):
            out[current].append(line.strip())
    return out


def test_master_by_name_workers_through_it_with_the_pinned_keys_and_the_agent(state):
    hosts = sshhosts.entries("c1", "203.0.113.7", [(2, "10.0.1.12"), (1, "10.0.1.11")])
    assert [h.alias for h in hosts] == ["c1", "c1-worker-1", "c1-worker-2"]
    path = sshhosts.write(Login("c1", user="ec2-user", port=2222), hosts)
    assert path == state / "ck" / "clusters" / "c1" / "ssh_hosts"
    assert path.stat().st_mode & 0o777 == 0o600
    found = blocks(path.read_text())
    known = f'UserKnownHostsFile "{state}/ck/clusters/c1/known_hosts"'
    common = ["User ec2-user", "Port 2222", known, "StrictHostKeyChecking yes",
              "ForwardAgent yes"]
    assert found["c1"] == ["HostName 203.0.113.7", *common]
    assert found["c1-worker-2"] == ["HostName 10.0.1.12", *common, "ProxyJump c1"]
    assert "IdentityFile" not in path.read_text()  # the agent: no key named, none copied
    assert sshhosts.remove("c1") and not path.exists() and not sshhosts.remove("c1")


def test_an_identity_file_is_named_by_its_path_never_copied(state):
    path = sshhosts.write(Login("c1", identity_file="~/My Keys/id_ed25519"),
                          sshhosts.entries("c1", "127.0.0.2", []))
    assert f'IdentityFile "{state}/home/My Keys/id_ed25519"' in path.read_text()
    assert sorted(p.name for p in path.parent.iterdir()) == ["ssh_hosts"]


@pytest.mark.parametrize(("login", "address"), [
    (Login("c1", identity_file='k"\nMatch exec "touch /tmp/x'), "127.0.0.2"),
    (Login("c1", user="root\nProxyCommand x"), "127.0.0.2"),
    (Login("c1"), "127.0.0.2\nProxyCommand touch /tmp/x"),
])
def test_a_value_that_would_add_a_directive_is_refused(login: Login, address: str):
    with pytest.raises(UsageError):
        sshhosts.write(login, sshhosts.entries("c1", address, []))
    assert not sshhosts.path("c1").exists()


def test_one_include_line_for_every_cluster_and_whether_ssh_config_has_it(state):
    line = sshhosts.include_line()
    assert line == f"Include {state}/ck/clusters/*/ssh_hosts"
    config = state / "home" / ".ssh" / "config"
    assert not sshhosts.included()  # no ~/.ssh/config at all
    config.parent.mkdir(parents=True)
    config.write_text("Host github.com\n    User git\n")
    assert not sshhosts.included()
    config.write_text(f"{line.replace(' ', '   ')}\n\nHost github.com\n    User git\n")
    assert sshhosts.included()
