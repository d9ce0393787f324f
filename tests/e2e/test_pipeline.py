"""The README's first command as a test: scripts/pipeline.py runs the whole job on a
sandbox of its own (sandbox start -> pack -> snapshot-dataset -> up -> deploy-dataset ->
train -> down -> sandbox stop), every stage through the `clusterkit` CLI, and this test
asserts each stage's effect from the summary it returns: the master reaches the workers
by name, every node verified the same dataset, the training result is correct, and
nothing is left (no tagged resource, no sandbox process, loop device or mount).

Marked ``pipeline``: it starts a sandbox of its own (on a loopback block no other
running sandbox holds)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests import support
from tests.e2e.clusters import ssh_agent

pytestmark = [pytest.mark.pipeline, pytest.mark.root, pytest.mark.mxnet]
SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "pipeline.py"


def _pipeline():
    spec = importlib.util.spec_from_file_location("pipeline", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_the_whole_pipeline_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    support.require_root("the sandbox's SSH nodes")
    pipeline = _pipeline()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # its own sandbox dir and records
    (tmp_path / "home").mkdir()
    for var in support.FOREIGN_AWS_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("CLUSTERKIT_SANDBOX_DIR", raising=False)
    lines: list[str] = []
    with ssh_agent(tmp_path) as sock:
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        (tmp_path / "work").mkdir()
        summary = pipeline.run_pipeline(tmp_path / "work", echo=lines.append)
    report = pipeline.render(summary) + "\n" + "\n".join(lines[-60:])
    stages = {s.name: s for s in summary.stages}
    assert [s.name for s in summary.stages] == [name for name, _ in pipeline.STAGES], report
    assert all(s.ok for s in summary.stages), report
    assert "by name" in stages["nodes by name"].detail
    assert f"({pipeline.WORKERS} nodes)" in stages["deploy-dataset"].detail
    assert summary.correct and f"{pipeline.WORKERS} of {pipeline.WORKERS} workers" \
        in summary.training, report
    assert summary.leftovers == [] and summary.ok, report
    loops = subprocess.run(["losetup", "-l", "-n"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in loops
