"""The system ssh command line of `clusterkit ssh`: strict host keys, agent forwarded,
workers through the master with -J, and the -F config that carries the checks to the
gateway hop (OpenSSH applies -o/-i/-p to the destination only)."""

import os
import subprocess

import pytest

from clusterkit.errors import NetworkSafetyError, RemoteError, UsageError
from clusterkit.remote import known_hosts, sshcmd
from clusterkit.remote.connect import Hop, Login
from tests.unit.test_spec_injection import FIELDS, PAYLOADS, payload_value

MASTER = Hop("c-master-0", "127.0.0.2")
WORKER = Hop("c-worker-1", "127.0.0.3")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    return tmp_path


def test_master_argv(home):
    login = Login("c")
    argv = sshcmd.ssh_argv(login, MASTER)
    assert argv == ["ssh", "-A", "-o", f"UserKnownHostsFile={home}/clusters/c/known_hosts",
                    "-o", "StrictHostKeyChecking=yes", "--", "ubuntu@127.0.0.2"]


def test_worker_argv_with_port_identity_and_command(home):
    login = Login("c", user="ec2-user", port=2222, identity_file="/keys/id")
    argv = sshcmd.ssh_argv(login, WORKER, via=MASTER, command=["uname", "-a"],
                           config=home / "cfg")
    assert argv[argv.index("-p") + 1] == "2222"
    assert argv[argv.index("-i") + 1] == "/keys/id"
    assert argv[argv.index("-F") + 1] == str(home / "cfg")
    assert argv[argv.index("-J") + 1] == "ec2-user@127.0.0.2:2222"
    assert argv[-4:] == ["--", "ec2-user@127.0.0.3", "uname", "-a"]
    assert "StrictHostKeyChecking=no" not in " ".join(argv)


def test_prepare_refuses_unrecorded_keys_and_writes_the_hop_config(home):
    login = Login("c", identity_file="/keys/id")
    with pytest.raises(RemoteError, match="no host key recorded for c-master-0"):
        sshcmd.prepare(login, WORKER, MASTER)
    known_hosts.record("c", {"127.0.0.2": "ssh-ed25519 AAAA"})
    with pytest.raises(RemoteError, match="no host key recorded for c-worker-1") as caught:
        sshcmd.prepare(login, WORKER, MASTER)
    assert "clusterkit up" in caught.value.hint
    known_hosts.record("c", {"127.0.0.3": "ssh-ed25519 BBBB"})
    argv = sshcmd.prepare(login, WORKER, MASTER, ["hostname"])
    config = sshcmd.config_path("c").read_text()
    assert argv[argv.index("-F") + 1] == str(sshcmd.config_path("c"))
    assert f'UserKnownHostsFile "{login.known_hosts}"' in config
    assert "StrictHostKeyChecking yes" in config and 'IdentityFile "/keys/id"' in config
    assert config.index("StrictHostKeyChecking") < config.index("Include ~/.ssh/config")
    assert "-F" not in sshcmd.prepare(login, MASTER)  # no hop, no config needed


def test_prepare_applies_the_net_guard(home, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    with pytest.raises(NetworkSafetyError):
        sshcmd.prepare(Login("c"), Hop("w", "10.0.0.5"), MASTER)


# --- spec values never become directives (the writers refuse them again) ------------

_IDENTITY = next(f for f in FIELDS if f["path"] == "ssh.identity_file")
_USER = next(f for f in FIELDS if f["path"] == "ssh.user")


@pytest.mark.parametrize("name", [n for n in PAYLOADS if n not in ("single_quote", "backticks")])
def test_writers_refuse_an_identity_file_that_ssh_would_read_as_more(home, name):
    """Single quotes and backquotes are inert inside ssh_config's double quotes (the
    schema still refuses them); everything else is refused by the writers themselves."""
    bad = payload_value(_IDENTITY, name)
    login = Login("c", identity_file=bad)
    known_hosts.record("c", {"127.0.0.2": "ssh-ed25519 AAAA", "127.0.0.3": "ssh-ed25519 BBBB"})
    for write in (lambda: sshcmd.write_config(login), lambda: sshcmd.ssh_argv(login, MASTER),
                  lambda: sshcmd.prepare(login, WORKER, MASTER)):
        with pytest.raises(UsageError, match=r"refusing ssh.identity_file") as caught:
            write()
        assert caught.value.exit_code == 2 and caught.value.hint
    assert not sshcmd.config_path("c").exists()


@pytest.mark.parametrize("name", list(PAYLOADS))
def test_ssh_argv_refuses_a_user_that_is_not_a_user_name(home, name):
    with pytest.raises(UsageError, match="refusing login user"):
        sshcmd.ssh_argv(Login("c", user=payload_value(_USER, name)), WORKER, via=MASTER)


def test_a_state_dir_with_a_space_stays_one_known_hosts_file(tmp_path, monkeypatch):
    """ssh reads an -o value as a config line, where an unquoted space separates two
    files (the second relative to the current directory): such a path is quoted."""
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path / "my state"))
    argv = sshcmd.ssh_argv(Login("c"), MASTER)
    assert argv[3] == f'UserKnownHostsFile="{tmp_path}/my state/clusters/c/known_hosts"'


def test_known_hosts_path_with_a_quote_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path / 'st"ate'))
    with pytest.raises(UsageError, match="known_hosts path"):
        sshcmd.write_config(Login("c"))


def test_real_ssh_reads_the_config_as_written(home):
    """OpenSSH itself (ssh -G: print the configuration, connect nowhere) reads the
    written file as exactly its directives, with a key path holding a space."""
    login = Login("c", identity_file="~/My Keys/id ed25519")
    path = sshcmd.write_config(login)
    out = subprocess.run(["ssh", "-G", "-F", str(path), "127.0.0.2"], capture_output=True,
                         text=True, check=True, timeout=20).stdout.splitlines()
    expanded = os.path.expanduser("~/My Keys/id ed25519")
    assert f"identityfile {expanded}" in out
    assert f"userknownhostsfile {login.known_hosts}" in out
    assert "stricthostkeychecking true" in out
    assert oct(path.stat().st_mode & 0o777) == "0o600"
