"""The CLI skeleton: every DESIGN.md command is registered, --version, exit codes."""

import subprocess
import sys

from click.testing import CliRunner

from clusterkit import __version__
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
