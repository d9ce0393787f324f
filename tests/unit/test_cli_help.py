"""Help that guides: `clusterkit --help` lists every command under a stage heading, every
command's help shows an example of itself, --version, and the read commands answer
--json with one JSON document."""

from __future__ import annotations

import importlib
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterkit import __version__
from clusterkit.cli import help as cli_help
from clusterkit.cli.main import load_all_commands

cli = load_all_commands()  # every command (the CLI loads one when it runs)

ROOT = Path(__file__).resolve().parents[2]


def _leaves(group: click.Group = cli, path: tuple[str, ...] = ()):
    for name, command in sorted(group.commands.items()):
        if command.hidden:  # recovery-controller: the master's, started by `train`
            continue
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        else:
            yield (*path, name), command


LEAVES = list(_leaves())


def _sections(text: str) -> dict[str, list[str]]:
    """heading -> the first word of every row under it, from click's help output."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = sections.setdefault(line[:-1], [])
        elif current is not None and line.startswith("  ") and not line.startswith("   "):
            current.append(line.split()[0])
    return sections


# the hidden one (recovery-controller) is the master's, started by `train --detach`
USER_COMMANDS = [name for name, command in cli.commands.items() if not command.hidden]


def test_help_lists_every_command_once_under_a_stage_heading():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    sections = _sections(result.output)
    stages = {h: names for h, names in sections.items() if h.endswith(" commands")}
    assert list(stages) == ["Spec commands", "Cluster commands", "Data commands",
                            "Training commands", "Sandbox commands"]
    listed = [name for names in stages.values() for name in names]
    assert sorted(listed) == sorted(USER_COMMANDS)
    assert stages["Cluster commands"].index("up") < stages["Cluster commands"].index("down")
    assert stages["Data commands"] == ["pack", "snapshot-dataset", "deploy-dataset"]
    assert stages["Training commands"] == ["train", "logs", "top", "job", "scaling", "stop"]
    assert "Commands" not in sections  # click's own alphabetical list is replaced


def test_a_command_no_stage_claims_is_listed_under_other():
    groups = cli_help.grouped(["up", "zeta", "validate", "alpha"])
    assert groups == [("Spec", ["validate"]), ("Cluster", ["up"]),
                      (cli_help.OTHER, ["alpha", "zeta"])]


def test_stage_table_names_only_registered_commands():
    named = [n for _, names in cli_help.STAGES for n in names]
    assert len(named) == len(set(named))
    assert set(named) == set(USER_COMMANDS)


@pytest.mark.parametrize("path", [p for p, _ in LEAVES], ids=" ".join)
def test_every_command_help_has_an_example_of_itself(path):
    result = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert re.search(r"^  Examples?:$", result.output, re.MULTILINE), result.output
    example = result.output.split("Example", 1)[1].splitlines()[1].strip()
    words = [w for w in shlex.split(example) if w != "--sandbox"]
    assert words[0] == "clusterkit" and tuple(words[1:1 + len(path)]) == path, example
    for word in words:  # a spec file an example names exists
        if word.startswith("examples/") and "*" not in word:
            assert (ROOT / word).is_file(), word


def test_version_option():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0 and result.output == f"clusterkit, version {__version__}\n"
    proc = subprocess.run([sys.executable, "-m", "clusterkit", "--version"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0 and __version__ in proc.stdout


def test_every_command_takes_json():
    for path, command in LEAVES:
        flags = {o for p in command.params if isinstance(p, click.Option) for o in p.opts}
        assert "--json" in flags, path


@pytest.mark.parametrize("args", [
    ["plan", "--offline", "examples/sandbox-cpu.yaml"],
    ["validate", "examples/sandbox-cpu.yaml"],
    ["schema"],
], ids=lambda a: a[0])
def test_read_commands_print_one_json_document(args, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert isinstance(json.loads(result.stdout), dict)


def test_sandbox_status_json_when_not_running(tmp_path):
    """Reads the state dir only: no sandbox is started."""
    result = CliRunner().invoke(cli, ["sandbox", "status", "--dir", str(tmp_path), "--json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.stdout)
    assert status["running"] is False and status["nodes"] == []


def test_ssh_print_json(monkeypatch):
    """`ssh --print --json`: the argv as JSON (do_ssh is replaced: it needs a cluster)."""
    from clusterkit.cluster.access import remote_ops

    argv = ["ssh", "-A", "-o", "UserKnownHostsFile=/k h", "ubuntu@127.0.0.2"]
    monkeypatch.setattr(remote_ops, "do_ssh", lambda *a, **k: argv)
    result = CliRunner().invoke(cli, ["ssh", "demo", "--print", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"argv": argv, "command": shlex.join(argv)}
    plain = CliRunner().invoke(cli, ["ssh", "demo", "--print"])
    assert plain.stdout == shlex.join(argv) + "\n"


def test_every_command_is_in_the_lazy_table_and_a_command_loads_only_its_own_module():
    """COMMAND_MODULES names every command its modules define; `clusterkit train` loads
    clusterkit.cli.train and none of the other commands' modules."""
    from clusterkit.cli import main

    defined = {c.name for m in set(main.COMMAND_MODULES.values())
               for c in importlib.import_module(f"clusterkit.cli.{m}").COMMANDS}
    assert defined | {"recovery-controller"} == set(main.COMMAND_MODULES)
    probe = ("import sys; from clusterkit.cli.main import cli; import click; "
             "cli.get_command(click.Context(cli), 'train'); "
             "print(sorted(m for m in sys.modules if m.startswith('clusterkit.cli.')))")
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=True).stdout
    assert "'clusterkit.cli.train'" in loaded
    assert not any(f"'clusterkit.cli.{m}'" in loaded
                   for m in set(main.COMMAND_MODULES.values()) - {"train"}), loaded
