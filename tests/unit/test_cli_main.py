"""The CLI skeleton: every DESIGN.md command is registered, --version, exit codes."""

import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from clusterkit import __version__
from clusterkit.cli.context import check_spec_argument, check_target_argument, leaf_commands
from clusterkit.cli.main import cli

DESIGN_COMMANDS = {
    "validate", "schema", "plan", "spot", "up", "status", "exec", "ssh", "pack",
    "deploy-dataset", "train", "logs", "stop", "down", "sandbox",
}


def test_every_design_command_is_registered_with_help():
    assert set(cli.commands) >= DESIGN_COMMANDS
    runner = CliRunner()
    for name in sorted(DESIGN_COMMANDS):
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "Usage:" in result.output


def test_version():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_unknown_command_is_usage_error_exit_2():
    proc = subprocess.run([sys.executable, "-m", "clusterkit", "no-such-command"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
    assert "Traceback" not in proc.stderr


BAD_SPEC = "name: ok\nregion: us-east-1\nnodes: {count: 0, instance_types: [c5.large]}\n"
SPEC = "SPEC"  # replaced by the bad spec's path
SPEC_COMMANDS = [["validate", SPEC], ["plan", SPEC], ["plan", "--offline", SPEC], ["up", SPEC],
                 ["spot", SPEC], ["status", SPEC], ["down", "--yes", SPEC],
                 ["exec", SPEC, "--", "true"], ["ssh", "--print", SPEC],
                 ["deploy-dataset", "--snapshot", "snap-0123456789abcdef0", SPEC],
                 ["train", SPEC], ["train", SPEC, "--nccl-test"], ["logs", SPEC], ["top", SPEC], ["job", SPEC], ["scaling", SPEC, "--nodes", "1"], ["stop", SPEC],
                 ["autostop", SPEC, "30m"], ["image", "build", SPEC]]


def _takes_a_spec(command: click.Command) -> bool:
    """SPEC_FILE, SPEC|NAME or NAME arguments: each may be given a spec file."""
    return any(isinstance(p, click.Argument) and (p.name in ("spec_file", "spec_files") or
               p.callback in (check_spec_argument, check_target_argument))
               for p in command.params)


def test_every_command_taking_a_spec_has_a_bad_spec_case():
    tested = {argv[0] for argv in SPEC_COMMANDS} | {  # a group's: its subcommand's name
        argv[1] for argv in SPEC_COMMANDS if argv[0] == "image"}
    wanted = {c.name for c in leaf_commands(cli) if _takes_a_spec(c)}
    assert wanted and wanted <= tested, wanted - tested


@pytest.mark.parametrize("argv", SPEC_COMMANDS, ids=lambda a: " ".join(a))
def test_no_aws_call_before_the_spec_validates(argv, tmp_path, monkeypatch):
    """Credentials and an endpoint are set (a closed loopback port), so a command that
    skipped validation would reach botocore; every API call is recorded there."""
    import botocore.client

    calls = []

    def record(self, operation, params):
        calls.append(operation)
        raise AssertionError(f"AWS call {operation} before the spec validated")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1",
                        }.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "CLUSTERKIT_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    bad = tmp_path / "bad.yaml"
    bad.write_text(BAD_SPEC)
    result = CliRunner().invoke(cli, [str(bad) if a == SPEC else a for a in argv])
    assert calls == []
    assert "Traceback" not in result.output
    assert result.exit_code == 2, result.output
    assert f"{bad}:3:" in result.output and "nodes.count" in result.output


def test_unexpected_exception_is_one_line_not_a_traceback(monkeypatch, tmp_path):
    def boom(*_args, **_kwargs):
        raise ValueError("something the code did not expect")

    monkeypatch.setattr("clusterkit.cli.validate.do_validate", boom)
    spec = tmp_path / "c.yaml"
    spec.write_text("name: x\n")
    result = CliRunner().invoke(cli, ["validate", str(spec)])
    assert result.exit_code == 1
    assert "unexpected error: ValueError: something the code did not expect" in result.output
    assert "--debug" in result.output and "Traceback" not in result.output
    debug = CliRunner().invoke(cli, ["--debug", "validate", str(spec)])
    assert isinstance(debug.exception, ValueError)


def test_the_cli_loads_aws_and_ssh_libraries_only_for_commands_that_use_them():
    """boto3 (~0.1 s to import) and paramiko/fabric (~0.1 s) are imported by the commands
    that talk to AWS or SSH, not by `--help`, `--version`, `validate` or `pack`."""
    import subprocess
    import sys

    probe = ("import sys, clusterkit.cli.main; "
             "print(sorted(m for m in ('boto3', 'botocore', 'paramiko', 'fabric', 'invoke') "
             "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


def test_plan_offline_exits_1_naming_the_cheapest_offer_max_price_left_out(tmp_path):
    """The shipped snapshot prices p4d spot from $2.47/h: a $1/h limit leaves nothing,
    and `plan` says so instead of planning a launch at an unknown price."""
    spec = tmp_path / "p4d.yaml"
    spec.write_text("name: p4d\nregion: us-east-1\nnodes:\n  count: 2\n"
                    "  instance_types: [p4d.24xlarge]\n  market: spot-then-on-demand\n"
                    "  max_price: 1.0\n")
    result = CliRunner().invoke(cli, ["plan", "--offline", str(spec)])
    assert result.exit_code == 1, result.output
    assert "nothing to launch: nodes.max_price $1/h excludes every offer" in result.output
    assert "the cheapest left out is p4d.24xlarge spot in" in result.output
    assert "(over max price $1/h)" in result.output and "raise nodes.max_price" in result.output
