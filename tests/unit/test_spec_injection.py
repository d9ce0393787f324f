"""A shared spec is never code on this machine: every spec string that reaches a local
file or command is fed each payload of spec_injection/cases.json (the issue's
``Match exec`` attack on ``ssh.identity_file``, a newline, NUL, tab, escapes, ``$(…)``,
backquotes, quotes, %-tokens, a leading dash). `clusterkit validate` exits 2 naming the
key path at file:line:col, and the JSON Schema rejects it too; the payloads a field can
legitimately hold (shell text in ``train.command``) and its legitimate values pass."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from clusterkit import spec as spec_api
from clusterkit.cli.main import cli
from clusterkit.spec.schema import json_schema

CASES = json.loads((Path(__file__).parent / "spec_injection" / "cases.json").read_text())
PAYLOADS: dict[str, dict[str, str]] = CASES["payloads"]
FIELDS: list[dict[str, Any]] = CASES["fields"]
BASE: dict[str, Any] = {
    "name": "inject", "region": "us-east-1",
    "nodes": {"count": 2, "instance_types": ["g5.xlarge"], "image": {"name": "ubuntu*"}},
    "ssh": {"user": "ubuntu"},
    "storage": {"scratch": {"mount": "/scratch"}, "efs": {"mount": "/efs"},
                "dataset": {"snapshot": "snap-0123456789abcdef0", "mount": "/data"}},
    "train": {"framework": "torchrun", "command": "python3 train.py", "env": {}},
    "tags": {},
}
VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def payload_value(field: dict[str, Any], name: str) -> str:
    payload = PAYLOADS[name]
    return payload["replace"] if "replace" in payload else field["base"] + payload["append"]


def _cases(refused: bool) -> list[tuple[str, str, str]]:
    return [(f["path"], name, payload_value(f, name)) for f in FIELDS for name in PAYLOADS
            if (name not in f["accepts"]) == refused]


def _spec_with(path: str, value: str) -> dict[str, Any]:
    data = json.loads(json.dumps(BASE))
    *parents, leaf = path.split(".")
    target = data
    for part in parents:
        target = target.setdefault(part, {})
    target[leaf] = value
    return data


def _write(tmp_path: Path, path: str, value: str) -> tuple[Path, int, int]:
    """The spec file, and the line and column where the value of ``path`` starts."""
    text = yaml.safe_dump(_spec_with(path, value), sort_keys=False, width=100000)
    lines = text.splitlines()
    at = 0
    for part in path.split("."):  # each key of the path, below the one before it
        at = next(i for i in range(at, len(lines)) if lines[i].lstrip().startswith(f"{part}:"))
    file = tmp_path / "spec.yaml"
    file.write_text(text)
    line = lines[at]
    return file, at + 1, len(line) - len(line.lstrip()) + len(path.rsplit(".", 1)[-1]) + 3


def test_every_field_and_payload_is_covered():
    paths = {f["path"] for f in FIELDS}
    assert {"ssh.identity_file", "ssh.user", "ssh.key_name", "storage.scratch.mount",
            "storage.efs.mount", "storage.dataset.mount", "train.workdir", "train.python",
            "train.command"} <= paths
    for field in FIELDS:
        assert set(field["accepts"]) <= set(PAYLOADS), field["path"]
        assert field["reaches"] and field["legit"], field["path"]
    assert PAYLOADS["match_exec"]["append"].startswith('"\nMatch exec ')


@pytest.mark.parametrize(("path", "payload", "value"), _cases(refused=True),
                         ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "")
def test_validate_refuses_the_payload_at_its_key(tmp_path, path, payload, value):
    file, line, col = _write(tmp_path, path, value)
    result = CliRunner().invoke(cli, ["--json", "validate", str(file)])
    assert result.exit_code == 2, (payload, result.output)
    issues = json.loads(result.stdout)["files"][0]["issues"]
    mine = [i for i in issues if i["path"] == path and i["level"] == "error"]
    assert [(i["file"], i["line"], i["col"]) for i in mine] == [(str(file), line, col)], issues
    assert "\n" not in mine[0]["message"] and "\x1b" not in mine[0]["message"]
    human = CliRunner().invoke(cli, ["validate", str(file)])
    assert f"{file}:{line}:{col}: error: {path}:" in human.output, human.output
    assert any(VALIDATOR.iter_errors(yaml.safe_load(file.read_text()))), "schema accepts it"


@pytest.mark.parametrize(("path", "payload", "value"), _cases(refused=False),
                         ids=lambda v: v if isinstance(v, str) and len(v) < 30 else "")
def test_payloads_a_field_can_hold_pass(tmp_path, path, payload, value):
    file, _, _ = _write(tmp_path, path, value)
    spec, issues = spec_api.check(str(file))
    assert spec is not None, [i.format() for i in issues if i.level == "error"]
    assert not any(VALIDATOR.iter_errors(yaml.safe_load(file.read_text())))


@pytest.mark.parametrize(("path", "value"), [(f["path"], v) for f in FIELDS
                                             for v in [f["base"], *f["legit"]]])
def test_legitimate_values_pass_unchanged(tmp_path, path, value):
    file, _, _ = _write(tmp_path, path, value)
    spec, issues = spec_api.check(str(file))
    assert spec is not None, [i.format() for i in issues if i.level == "error"]
    assert not [i for i in issues if i.path == path], issues
    assert _lookup(spec, path) == value


def _lookup(spec: spec_api.Spec, path: str) -> Any:
    obj: Any = spec
    for part in path.split("."):
        obj = obj[part] if isinstance(obj, dict) or hasattr(obj, "keys") else getattr(obj, part)
    return obj
