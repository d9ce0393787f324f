"""Every malformed spec in spec_corpus/ fails `clusterkit validate` with exit 2 and a
located message naming the expected line and key path; where the JSON Schema can say
so (``schema=reject``) the schema rejects it too, and where only the meaning checks can
(``schema=accept``) the schema lets it through: the two stay in step."""

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
_EXPECT = re.compile(rb"^# expect: line=(\d+) path=(\S*) schema=(reject|accept|n/a)\s*$")


def _expectation(path: Path) -> tuple[int, str, str]:
    first = path.read_bytes().split(b"\n", 1)[0]
    m = _EXPECT.match(first)
    assert m, f"{path.name}: first line must be '# expect: line=N path=P schema=...'"
    return int(m.group(1)), m.group(2).decode(), m.group(3).decode()


def test_corpus_is_big_enough():
    assert len(FILES) >= 30


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
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


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_human_output_names_file_line_col_and_key(path: Path):
    line, key_path, _ = _expectation(path)
    result = CliRunner().invoke(cli, ["validate", str(path)])
    assert result.exit_code == 2
    pattern = rf"{re.escape(str(path))}:{line}:\d+: error:" + (
        rf" {re.escape(key_path)}:" if key_path else "")
    assert re.search(pattern, result.output), result.output


SCHEMA_CASES = [p for p in FILES if _expectation(p)[2] != "n/a"]


@pytest.mark.parametrize("path", SCHEMA_CASES, ids=lambda p: p.stem)
def test_schema_agrees_with_validator(path: Path):
    _, _, verdict = _expectation(path)
    root, issues = parse(path.read_text(), str(path))
    assert root is not None and not issues
    validator = jsonschema.Draft202012Validator(json_schema())
    rejected = any(True for _ in validator.iter_errors(root.plain()))
    assert rejected == (verdict == "reject"), path.name
