"""Every registered command, given bad arguments, answers with the right exit code, on
the right stream, with a message that says what is wrong: usage errors and invalid
specs exit 2; under --json the error is ``{"error", "hint", "exit_code"}`` on stdout.

No AWS endpoint is reachable (a closed loopback port) and every botocore API call is
recorded and refused, so a command that used a bad argument would show up."""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterkit.cli.context import leaf_commands
from clusterkit.cli.main import load_all_commands

cli = load_all_commands()  # every command (the CLI loads one when it runs)


class Arg(Enum):
    NONE = "none"      # no required positional argument
    SPEC = "spec"      # SPEC_FILE
    TARGET = "target"  # NAME, or a spec file
    OTHER = "other"    # required arguments that are neither (pack PREFIX ROOT)


@dataclass(frozen=True)
class Row:
    arg: Arg
    rest: tuple[str, ...] = ()  # what follows the first argument
    required: bool = True
    missing: str = "Missing argument"  # what a missing required argument says


SNAP = ("--snapshot", "snap-0123456789abcdef0")
COMMANDS: dict[str, Row] = {
    "validate": Row(Arg.SPEC), "schema": Row(Arg.NONE), "plan": Row(Arg.SPEC),
    "spot": Row(Arg.SPEC, required=False), "up": Row(Arg.SPEC, missing="needs a SPEC file or --plan FILE"),
    "status": Row(Arg.TARGET, required=False), "down": Row(Arg.TARGET, ("--yes",), missing="needs a SPEC or NAME, or --plan FILE"),
    "exec": Row(Arg.TARGET, ("--", "true")), "ssh": Row(Arg.TARGET, ("--print",)),
    "pack": Row(Arg.OTHER), "snapshot-dataset": Row(Arg.OTHER), "deploy-dataset": Row(Arg.SPEC, SNAP), "train": Row(Arg.SPEC),
    "logs": Row(Arg.TARGET), "top": Row(Arg.TARGET), "job": Row(Arg.TARGET),
    "scaling": Row(Arg.TARGET, ("--nodes", "1")), "stop": Row(Arg.TARGET), "autostop": Row(Arg.TARGET, ("30m",)),
    "sandbox start": Row(Arg.NONE),
    "sandbox stop": Row(Arg.NONE), "sandbox status": Row(Arg.NONE),
    "sandbox interrupt": Row(Arg.OTHER), "sandbox partition": Row(Arg.OTHER),
    "sandbox imds-fault": Row(Arg.OTHER), "sandbox restart-sshd": Row(Arg.OTHER),
    "sandbox cut-client": Row(Arg.NONE),
    "iam-policy": Row(Arg.NONE), "capacity-blocks": Row(Arg.NONE),
    "image build": Row(Arg.SPEC), "image list": Row(Arg.NONE), "image delete": Row(Arg.OTHER),
}
BAD_SPEC = "name: ok\nregion: us-east-1\nnodes: {count: 0, instance_types: [c5.large]}\n"
BAD_NAMES = ["../..", "a/b", "SENTINEL", "Bad_Name", ".hidden", "x-", "~"]


@dataclass(frozen=True)
class Case:
    command: str
    argv: tuple[str, ...]  # {tmp} is the test's tmp_path
    code: int
    message: str


def _cases() -> list[Case]:
    out = []
    for command, row in COMMANDS.items():
        path = tuple(command.split())
        out.append(Case(command, (*path, "--no-such-option"), 2, "No such option"))
        if row.required and row.arg is not Arg.NONE:
            out.append(Case(command, path, 2, row.missing))
        if row.arg is Arg.TARGET:
            out += [Case(command, (*path, bad, *row.rest), 2, "not a cluster name")
                    for bad in BAD_NAMES]
        if row.arg in (Arg.SPEC, Arg.TARGET):
            out.append(Case(command, (*path, "{tmp}/missing.yaml", *row.rest), 2, "spec file"))
            out.append(Case(command, (*path, "{tmp}/bad.yaml", *row.rest), 2, "nodes.count"))
    return out


CASES = _cases()


def _id(case: Case) -> str:
    return " ".join(case.argv).replace("{tmp}/", "")


def test_the_table_covers_every_registered_command():
    registered = {" ".join(c.name for c in _path(cmd)) for cmd in leaf_commands(cli)}
    assert registered == set(COMMANDS)


def _path(command: click.Command) -> list[click.Command]:
    """The command's path from the top group (its parents, by name lookup)."""
    for name, top in cli.commands.items():
        if top is command:
            return [top]
        if isinstance(top, click.Group) and command in top.commands.values():
            sub = next(n for n, c in top.commands.items() if c is command)
            assert sub == command.name and name == top.name
            return [top, command]
    raise AssertionError(command.name)


@pytest.fixture()
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    import botocore.client

    calls: list[str] = []

    def record(_self, operation, _params):
        calls.append(operation)
        raise AssertionError(f"AWS call {operation} with a bad argument")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_REGION": "us-east-1",
                        "CLUSTERKIT_HOME": str(tmp_path / "home" / "state"),
                        "CLUSTERKIT_SANDBOX_DIR": str(tmp_path / "sandbox")}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_PROFILE", "CLUSTERKIT_SANDBOX"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "bad.yaml").write_text(BAD_SPEC)
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    clusters = tmp_path / "home" / "state" / "clusters"
    (clusters / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(clusters)  # `a/b` and `../..` name real directories from here
    return {"calls": calls, "sentinel": sentinel}


def _argv(case: Case, tmp_path: Path, json_flag: bool) -> list[str]:
    argv = [str(tmp_path / "sentinel") if a == "SENTINEL" else a.replace("{tmp}", str(tmp_path))
            for a in case.argv]
    if json_flag:  # after the command's own arguments, before a `--`
        cut = argv.index("--") if "--" in argv else len(argv)
        argv.insert(cut, "--json")
    return argv


@pytest.mark.parametrize("json_flag", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_bad_arguments(case: Case, json_flag: bool, env, tmp_path: Path):
    result = CliRunner().invoke(cli, _argv(case, tmp_path, json_flag))
    assert result.exit_code == case.code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    assert env["calls"] == []
    assert env["sentinel"].is_dir() and (tmp_path / "home" / "state" / "clusters" / "a"
                                         / "b").is_dir(), "a bad argument deleted a directory"
    if not json_flag:
        assert result.stdout == ""
        assert case.message in result.stderr
        return
    assert result.stderr.strip() == ""  # (spot's transient progress bar leaves a newline)
    data = json.loads(result.stdout)
    assert case.message in json.dumps(data)
    if case.command == "validate" and "error" not in data:  # validate's answer is its report
        assert data["ok"] is False
        return
    assert set(data) >= {"error", "hint", "exit_code"}
    assert data["exit_code"] == case.code


@pytest.mark.parametrize(("extra", "message"), [
    (["--nccl-test", "--", "python3", "x.py"], "takes no COMMAND"),
    (["--nccl-test", "--detach"], "takes no COMMAND, --detach"),
    (["--nccl-test", "--attach"], "--attach"),
    (["--nccl-test", "--max-recoveries", "1"], "--max-recoveries"),
    (["--nccl-max-bytes", "1G"], "--nccl-max-bytes goes with --nccl-test"),
    (["--nccl-test", "--nccl-max-bytes", "1X"], "bytes, or a number with K, M or G"),
    (["--nccl-test", "--nccl-max-bytes", "4"], "must be 8 B to 8 GiB"),
    (["--nccl-test", "--preflight"], "--preflight"),
    (["--attach", "--preflight"], "--preflight checks the nodes before a job starts"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else "")
def test_nccl_test_options_that_do_not_go_together(extra, message, env, tmp_path):
    spec = Path(__file__).parents[2] / "examples" / "sandbox-cpu.yaml"
    result = CliRunner().invoke(cli, ["train", str(spec), *extra])
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr and "Traceback" not in result.output
    assert env["calls"] == []


def test_json_before_the_command_is_the_same(env, tmp_path):
    result = CliRunner().invoke(cli, ["--json", "down", "../.."])
    assert result.exit_code == 2 and result.stderr == ""
    assert "not a cluster name" in json.loads(result.stdout)["error"]


def test_the_debug_hint_works_where_it_says(env, tmp_path, monkeypatch):
    """The unexpected-error hint says --debug may go before or after the command name;
    both positions re-raise the original exception."""
    def boom(*_args, **_kwargs):
        raise ValueError("unexpected")

    monkeypatch.setattr("clusterkit.cli.validate.do_validate", boom)
    spec = tmp_path / "c.yaml"
    spec.write_text("name: x\n")
    plain = CliRunner().invoke(cli, ["validate", str(spec)])
    assert plain.exit_code == 1 and "--debug (before or after the command" in plain.stderr
    for argv in (["--debug", "validate", str(spec)], ["validate", str(spec), "--debug"]):
        assert isinstance(CliRunner().invoke(cli, argv).exception, ValueError), argv
    as_json = CliRunner().invoke(cli, ["validate", str(spec), "--json"])
    assert json.loads(as_json.stdout) == {
        "error": "unexpected error: ValueError: unexpected", "exit_code": 1,
        "hint": "run the same command again with --debug (before or after the command "
                "name) for the traceback, and please report it"}


def test_error_json_keeps_issues_and_per_node_results():
    from clusterkit.cli.render import error_json
    from clusterkit.errors import RemoteError, SpecError, SpecIssue

    failed = RemoteError("command failed on 1 of 2 node(s): worker-1", "see its output",
                         results={"master": {"exit_code": 0}, "worker-1": {"exit_code": 1}})
    data = error_json(failed.message, failed.hint, failed.exit_code, failed)
    assert data == {"error": failed.message, "hint": "see its output", "exit_code": 1,
                    "results": {"master": {"exit_code": 0}, "worker-1": {"exit_code": 1}}}
    issue = SpecIssue("c.yaml", 3, 9, "nodes.count", "must be at least 1")
    spec = SpecError([issue], "fix it")
    data = error_json(spec.message, spec.hint, spec.exit_code, spec)
    assert data["exit_code"] == 2 and data["issues"][0]["path"] == "nodes.count"
    assert json.loads(json.dumps(data)) == data
