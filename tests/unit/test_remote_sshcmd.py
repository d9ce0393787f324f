"""The system ssh command line of `clusterkit ssh`: strict host keys, agent forwarded,
workers through the master with -J, and the -F config that carries the checks to the
gateway hop (OpenSSH applies -o/-i/-p to the destination only)."""

import pytest

from clusterkit.errors import NetworkSafetyError, RemoteError
from clusterkit.remote import known_hosts, sshcmd
from clusterkit.remote.connect import Hop, Login

MASTER = Hop("c-master-0", "127.0.0.2")
WORKER = Hop("c-worker-1", "127.0.0.3")


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(known_hosts.HOME_ENV, str(tmp_path))
    return tmp_path


def test_master_argv(home):
    login = Login("c")
    argv = sshcmd.ssh_argv(login, MASTER)
    assert argv == ["ssh", "-A", "-o", f'UserKnownHostsFile="{home}/clusters/c/known_hosts"',
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
