"""Every malformed spec in spec_corpus/ fails `clusterkit validate` with exit 2 and a
located message naming the expected line and key path; where the JSON Schema can say
so (``schema=reject``) the schema rejects it too, and where only the meaning checks can
(``schema=accept``) the schema lets it through: the two stay in step.

A file whose header says ``# expect: warning line=N path=P schema=accept`` is a valid
spec with exactly that one warning: `validate` exits 0 and names it at N and P, and
`validate --strict` turns it into an error (exit 2) at the same place."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.spec.schema import json_schema
from clusterkit.spec.yamlload import parse

CORPUS = Path(__file__).parent / "spec_corpus"
FILES = sorted(CORPUS.glob("*.yaml"))
_EXPECT = re.compile(rb"^# expect: (?:(warning) )?line=(\d+) path=(\S*) "
                     rb"schema=(reject|accept|n/a)\s*$")


def _expectation(path: Path) -> tuple[int, str, str]:
    first = path.read_bytes().split(b"\n", 1)[0]
    m = _EXPECT.match(first)
    assert m, f"{path.name}: first line must be '# expect: [warning ]line=N path=P schema=...'"
    return int(m.group(2)), m.group(3).decode(), m.group(4).decode()


def _is_warning_case(path: Path) -> bool:
    return path.read_bytes().startswith(b"# expect: warning ")


ERRORS = [p for p in FILES if not _is_warning_case(p)]
WARNINGS = [p for p in FILES if _is_warning_case(p)]


def test_corpus_is_big_enough():
    assert len(ERRORS) >= 30 and len(WARNINGS) >= 5


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_malformed_spec_exits_2_with_located_issue(path: Path):
    line, key_path, _ = _expectation(path)
    result = CliRunner().invoke(cli, ["--json", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    report = json.loads(result.stdout)
    errors = [i for i in report["files"][0]["issues"] if i["level"] == "error"]
    assert errors, report
    located = [(i["line"], i["path"]) for i in errors]
    assert (line, key_path) in located, f"{path.name}: want {(line, key_path)} in {located}"
    for issue in errors:
        assert issue["file"] == str(path) and issue["col"] >= 1 and issue["message"]


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_human_output_names_file_line_col_and_key(path: Path):
    line, key_path, _ = _expectation(path)
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    pattern = rf"{re.escape(str(path))}:{line}:\d+: error:" + (
        rf" {re.escape(key_path)}:" if key_path else "")
    assert re.search(pattern, result.output), result.output


@pytest.mark.parametrize("path", WARNINGS, ids=lambda p: p.stem)
def test_warning_spec_exits_0_with_exactly_that_warning(path: Path):
    line, key_path, verdict = _expectation(path)
    assert verdict == "accept", f"{path.name}: a spec with only a warning is schema-valid"
    result = CliRunner().invoke(cli, ["--json", "validate", str(path)])
    assert result.exit_code == 0, result.output
    issues = json.loads(result.stdout)["files"][0]["issues"]
    assert [(i["level"], i["line"], i["path"]) for i in issues] == \
        [("warning", line, key_path)], issues
    assert issues[0]["col"] >= 1 and issues[0]["message"] and issues[0]["hint"]
    human = CliRunner().invoke(cli, ["validate", str(path)])
    assert human.exit_code == 0
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+: warning: {re.escape(key_path)}:",
                     human.output), human.output


@pytest.mark.parametrize("path", WARNINGS, ids=lambda p: p.stem)
def test_warning_is_an_error_under_strict(path: Path):
    line, key_path, _ = _expectation(path)
    result = CliRunner().invoke(cli, ["validate", "--strict", str(path)])
    assert result.exit_code == 2, result.output
    assert re.search(rf"{re.escape(str(path))}:{line}:\d+: error: {re.escape(key_path)}:",
                     result.output), result.output
    assert "(warning, --strict)" in result.output


SCHEMA_CASES = [p for p in FILES if _expectation(p)[2] != "n/a"]


@pytest.mark.parametrize("path", SCHEMA_CASES, ids=lambda p: p.stem)
def test_schema_agrees_with_validator(path: Path):
    _, _, verdict = _expectation(path)
    root, issues = parse(path.read_text(), str(path))
    assert root is not None and not issues
    validator = jsonschema.Draft202012Validator(json_schema())
    rejected = any(True for _ in validator.iter_errors(root.plain()))
    assert rejected == (verdict == "reject"), path.name
