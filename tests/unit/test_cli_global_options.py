"""Global options work before and after the command name, on every command; `plan
--offline` needs no sandbox even in sandbox mode.

No AWS endpoint is reachable (a closed loopback port); every botocore API call is
recorded with its region and refused, which is how a test sees where a command went."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterkit.cli.context import leaf_commands
from clusterkit.cli.main import ASKING_COMMANDS, cli

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GLOBAL_FLAGS = ("--region", "--profile", "--json", "--debug", "--sandbox")


class Refused(Exception):
    """What the recorded botocore call raises instead of reaching the network."""


@pytest.fixture()
def aws_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    import botocore.client

    calls: list[tuple[str, str]] = []

    def record(self, operation, _params):
        calls.append((operation, self.meta.region_name))
        raise Refused(operation)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1",
                        "AWS_CONFIG_FILE": str(tmp_path / "no-config"),
                        "CLUSTERKIT_HOME": str(tmp_path / "state"),
                        "CLUSTERKIT_SANDBOX_DIR": str(tmp_path / "no-sandbox")}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "CLUSTERKIT_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    return calls


def test_every_command_takes_the_global_options_after_its_name():
    for command in leaf_commands(cli):
        flags = {opt for p in command.params if isinstance(p, click.Option) for opt in p.opts}
        assert set(GLOBAL_FLAGS) <= flags, command.name
        if command.name in ASKING_COMMANDS:
            assert "--yes" in flags, command.name


@pytest.mark.parametrize("argv", [
    ["--region", "us-west-2", "status", "gl-one"],
    ["status", "gl-one", "--region", "us-west-2"],
    ["status", "--region", "us-west-2", "gl-one"],
], ids=["before", "after", "between"])
def test_region_before_or_after_the_command(argv, aws_calls):
    result = CliRunner().invoke(cli, argv)
    assert aws_calls and {region for _, region in aws_calls} == {"us-west-2"}, result.output
    assert result.exit_code == 1


def test_profile_json_and_debug_after_the_command(aws_calls):
    result = CliRunner().invoke(cli, ["status", "gl-two", "--profile", "no-such-profile",
                                      "--json"])
    assert result.exit_code == 1 and aws_calls == []
    error = json.loads(result.stdout)
    assert "no-such-profile" in error["error"] and error["exit_code"] == 1
    assert "--profile" in error["hint"]
    debug = CliRunner().invoke(cli, ["status", "gl-two", "--region", "us-west-2", "--debug"])
    assert isinstance(debug.exception, Refused)


def test_yes_before_the_command_reaches_down(aws_calls):
    """`--yes` is global too: given before `down`, down does not ask (it goes straight to
    its inventory, which is refused here)."""
    result = CliRunner().invoke(cli, ["--yes", "down", "gl-three", "--region", "us-west-2"],
                                input="")
    assert "delete cluster" not in result.output and aws_calls


@pytest.mark.parametrize("where", ["env", "flag-before", "flag-after"])
def test_plan_offline_needs_no_sandbox_in_sandbox_mode(where, aws_calls, monkeypatch):
    """The sandbox is stopped (its state dir does not exist). Before: refused."""
    argv = ["plan", str(EXAMPLES / "sandbox-cpu.yaml"), "--offline", "--json"]
    if where == "env":
        monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    elif where == "flag-before":
        argv = ["--sandbox", *argv]
    else:
        argv.append("--sandbox")
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["choice"]["instance_type"]
    assert aws_calls == []
    assert "sandbox mode" not in result.stderr


def test_online_plan_in_sandbox_mode_still_wants_the_sandbox(aws_calls, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    result = CliRunner().invoke(cli, ["plan", str(EXAMPLES / "sandbox-cpu.yaml")])
    assert result.exit_code == 1 and aws_calls == []
    assert "the sandbox is not running" in result.stderr


def test_a_live_bar_is_closed_when_the_command_fails_or_is_interrupted():
    """A wait's bar (on a terminal) never outlives its command: the global-options
    wrapper closes every reporter the command made, on success, error or Ctrl-C."""
    import io

    from rich.console import Console

    from clusterkit.cli.context import get_ctx, global_options
    from clusterkit.errors import ClusterkitError
    from clusterkit.events import Event, Kind, Stage

    made = []

    @click.command()
    @click.argument("how")
    def waits(how: str) -> None:
        console = Console(file=io.StringIO(), force_terminal=True)
        report = get_ctx().reporter(console)
        made.append(report)
        report(Event(Kind.STAGE_STARTED, "waiting for SSH on 3 node(s)", stage=Stage.SSH))
        assert report._bar is not None  # live while the command runs
        if how == "fails":
            raise ClusterkitError("boom", "hint")
        if how == "interrupted":
            raise KeyboardInterrupt

    global_options(waits, offline=True)
    for how in ("ends", "fails", "interrupted"):
        CliRunner().invoke(waits, [how])
        assert made[-1]._bar is None, how
    assert len(made) == 3


COMMANDS_ON_AWS = [["status", "gl-four"], ["down", "gl-four", "--yes"],
                   ["exec", "gl-four", "--", "true"], ["logs", "gl-four"], ["stop", "gl-four"],
                   ["spot", "--instance-types", "c5.large"]]


@pytest.mark.parametrize("variable", ["AWS_REGION", "AWS_DEFAULT_REGION"])
@pytest.mark.parametrize("argv", COMMANDS_ON_AWS, ids=lambda a: a[0])
def test_either_region_variable_picks_the_region_of_the_first_call(argv, variable, aws_calls,
                                                                   monkeypatch):
    """AWS_REGION is honoured wherever AWS_DEFAULT_REGION is (boto3 alone reads only the
    latter), for every command that calls AWS."""
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.setenv(variable, "eu-west-3")
    result = CliRunner().invoke(cli, argv)
    assert aws_calls, result.output
    assert aws_calls[0][1] == "eu-west-3", (aws_calls, result.output)


@pytest.mark.parametrize("where", ["flag-before", "flag-after", "AWS_REGION",
                                   "AWS_DEFAULT_REGION"])
@pytest.mark.parametrize("argv", COMMANDS_ON_AWS, ids=lambda a: a[0])
def test_a_region_aws_does_not_have_is_refused_before_any_call(argv, where, aws_calls,
                                                               monkeypatch):
    monkeypatch.delenv("AWS_REGION")
    if where == "flag-before":
        argv = ["--region", "us-east-9", *argv]
    elif where == "flag-after":
        argv = [argv[0], "--region", "us-east-9", *argv[1:]]
    else:
        monkeypatch.setenv(where, "us-east-9")
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert aws_calls == []
    assert "'us-east-9' is not an AWS region" in result.output
    assert "did you mean us-east-2 or us-east-1?" in result.output
