"""The typed wire records (``clusterkit.node.wire`` and the records built on it):
round-trip and compatibility cases as data, one loop; and each wire file's one writer.

A case is ``tests/unit/wire_cases/<record>/<case>.json``:
  {"record": "clusterkit.node.jobfile:JobFile", "where": "node 1: job.json",
   "json": {...},                     # what a node or the client wrote
   "expect_json": {...},              # optional: to_json() of what was read (an older
                                      #   version's record, read and written anew);
                                      #   default: "json" itself (a round trip)
   "error": ["newer than", "node 1"]} # instead: from_json refuses it, saying all these
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import re
from pathlib import Path

import pytest

from clusterkit.node import wire

ROOT = Path(__file__).resolve().parents[2]
CASES = sorted((Path(__file__).parent / "wire_cases").glob("*/*.json"))
# each wire file -> the one module that spells its name (its writer and its reader)
WIRE_FILES: dict[str, str] = {
    "job.json": "clusterkit/node/jobfile.py",  # what one node's supervisor runs
    "state.json": "clusterkit/node/nodestate.py",  # how the job stands on one node
    "metrics.jsonl": "clusterkit/node/samples.py",  # the sampler's samples
    "metrics.1.jsonl": "clusterkit/node/samples.py",  # and their rotated file
    "report.json": "clusterkit/cluster/jobs/report.py",  # the job's report on the master
    "summary.json": "clusterkit/node/samples.py",  # the job's running totals on a node
    "stop.json": "clusterkit/node/nodestate.py",  # a stop's grace, for the daemon
}


def load_record(spec: str) -> type:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def test_every_record_has_cases():
    assert len(CASES) >= 2 * len({c.parent.name for c in CASES}) > 0, CASES


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_wire_case(case: Path):
    data = json.loads(case.read_text())
    record = load_record(data["record"])
    assert record.VERSION >= 1 and record.KIND
    if "error" in data:
        with pytest.raises(wire.WireError) as refused:
            record.from_json(data["json"], data["where"])
        for words in data["error"]:
            assert words in str(refused.value), (words, str(refused.value))
        return
    read = record.from_json(data["json"], data["where"])
    written = read.to_json()
    assert written == data.get("expect_json", data["json"])
    assert json.loads(json.dumps(written)) == written  # plain JSON, nothing else
    assert record.from_json(written, data["where"]) == read  # and read back the same
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(read, next(iter(read.__dataclass_fields__)), None)


def test_a_newer_record_names_the_file_the_node_and_both_versions():
    with pytest.raises(wire.WireError) as refused:
        wire.version_of({"v": 3}, "state.json", 2, "node 2 (worker-1): state.json")
    text = str(refused.value)
    assert "node 2 (worker-1): state.json" in text and "version 3" in text and "(2)" in text
    assert "clusterkit up" in text
    assert wire.version_of({"a": 1}, "x", 1, "w") == {"a": 1}  # no "v": version 1
    for bad in ([], "x", {"v": "2"}, {"v": 0}, {"v": True}):
        with pytest.raises(wire.WireError):
            wire.version_of(bad, "x", 2, "w")


def spelled_in(name: str) -> list[str]:
    """Every module of the product with ``name`` in a string that is not a docstring, as
    a whole file name ("autostop-state.json" does not name state.json). Not the sandbox's
    modules: its own daemon's state.json is the emulation's file, not one of a node."""
    whole = re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w.-])")
    found = []
    for path in sorted((ROOT / "clusterkit").rglob("*.py")):
        if path.is_relative_to(ROOT / "clusterkit" / "sandbox"):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                  ast.AsyncFunctionDef))
                and n.body and isinstance(n.body[0], ast.Expr)
                and isinstance(n.body[0].value, ast.Constant)}
        if any(isinstance(n, ast.Constant) and isinstance(n.value, str) and whole.search(n.value)
               and id(n) not in docs for n in ast.walk(tree)):
            found.append(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("name", sorted(WIRE_FILES) or ["(none yet)"])
def test_each_wire_file_is_named_by_one_module(name: str):
    """The one module that names a wire file holds its writer and its reader: no other
    code can write it (or read it) without spelling its name."""
    if name == "(none yet)":
        pytest.fail("no wire file registered")
    assert spelled_in(name) == [WIRE_FILES[name]]
