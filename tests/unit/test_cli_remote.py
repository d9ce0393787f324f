"""`clusterkit exec` / `ssh` option wiring: the agent is forwarded by `exec` only on
-A/--forward-agent (the help says so), and a --user or --identity-file the spec's
ssh.user / ssh.identity_file patterns refuse (a quote, a newline: text that would land
in ssh's command line or ssh_config) exits 2 before anything else runs (no cluster
lookup, no AWS call)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.cluster.access.remote_ops import check_login_options, login_for
from clusterkit.errors import UsageError

BAD_USERS = ['x"\nMatch exec "touch /tmp/pwned"', "root\n", "a b", "-oProxyCommand=x",
             "Ubuntu", "u;id", "", "x" * 33]


@pytest.mark.parametrize("user", BAD_USERS)
def test_bad_user_is_refused_before_any_use(user: str):
    with pytest.raises(UsageError) as caught:
        check_login_options(user)
    assert caught.value.exit_code == 2 and "ssh.user" in (caught.value.hint or "")
    with pytest.raises(UsageError):  # before the target is even looked at
        login_for("/nonexistent/spec.yaml", None, user=user)


@pytest.mark.parametrize("command", [["exec", "c1", "--user", BAD_USERS[0], "--", "true"],
                                     ["ssh", "c1", "--user", BAD_USERS[0], "--print"]])
def test_cli_exits_2_on_a_bad_user(command: list[str], tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # never reached
    result = CliRunner().invoke(cli, command)
    assert result.exit_code == 2, result.output
    assert "not a Unix user name" in result.output


BAD_FILES = ['k"\nMatch exec "touch /tmp/pwned"', "~/.ssh/id\n", "$HOME/k", "`id`", "k%d",
             "-oProxyCommand=x", "a\\b", "k'"]


@pytest.mark.parametrize("path", BAD_FILES)
def test_bad_identity_file_is_refused_before_any_use(path: str):
    with pytest.raises(UsageError) as caught:
        login_for("/nonexistent/spec.yaml", None, identity_file=path)
    assert caught.value.exit_code == 2 and "ssh.identity_file" in (caught.value.hint or "")


def test_cli_exits_2_on_a_bad_identity_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path))
    result = CliRunner().invoke(cli, ["ssh", "c1", "-i", BAD_FILES[0], "--print"])
    assert result.exit_code == 2, result.output
    assert "cannot be written into ssh's config" in " ".join(result.output.split())


@pytest.mark.parametrize("user", ["ubuntu", "ec2-user", "_svc", None])
def test_good_values_pass(user: str | None):
    check_login_options(user, "~/.ssh/my key/id_ed25519")
    check_login_options(user, None)


def test_exec_help_says_the_agent_is_forwarded_only_with_a():
    text = CliRunner().invoke(cli, ["exec", "--help"], terminal_width=200).output
    assert "-A, --forward-agent" in text
    assert "not forwarded unless you pass -A" in text
    ssh_text = CliRunner().invoke(cli, ["ssh", "--help"], terminal_width=200).output
    assert "agent forwarded (-A)" in ssh_text and "ssh-add -c" in ssh_text


def test_ssh_without_an_ssh_command_says_which_package_has_it(monkeypatch):
    """`clusterkit ssh` becomes the system ssh (cli/remote.exec_ssh); none on PATH is a
    clear error, not a traceback from execvp."""
    from clusterkit.cli.remote import exec_ssh
    from clusterkit.errors import RemoteError

    monkeypatch.setenv("PATH", "")
    with pytest.raises(RemoteError, match="no `ssh` command on this machine") as caught:
        exec_ssh(["ssh", "-A", "ubuntu@127.0.0.2"])
    assert "openssh-client" in caught.value.hint
