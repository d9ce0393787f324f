"""README's shell blocks marked ``bash sandbox`` run as printed, in order, in one bash
(`set -euo pipefail`), from the repository root, as a new user would type them: activate
the environment, start the sandbox, validate and plan the examples, bring the example
cluster up, reach the nodes, pack/publish/deploy a dataset, train on it, tear it all
down. The one change to the text: ``/tmp/ck-walk`` (the blocks' scratch directory) is
this test's own temporary directory.

Marked ``pipeline``: the blocks start and stop a sandbox of their own (on a loopback
block no other running sandbox holds)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests import support
from tests.e2e.clusters import ssh_agent

pytestmark = [pytest.mark.pipeline, pytest.mark.root, pytest.mark.mxnet]
ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"^```bash sandbox\n(.*?)^```$", re.S | re.M)
SCRATCH = "/tmp/ck-walk"


def sandbox_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


def test_readme_marks_the_walk():
    blocks = sandbox_blocks((ROOT / "README.md").read_text())
    script = "\n".join(blocks)
    for command in ("sandbox start", "up examples/sandbox-cpu.yaml", "deploy-dataset",
                    "train", "down sandbox", "sandbox stop"):
        assert f"clusterkit {command}" in script, command


def test_readme_walk_runs_as_printed(tmp_path: Path):
    support.require_root("the sandbox's SSH nodes")
    script = "\n".join(sandbox_blocks((ROOT / "README.md").read_text()))
    work = tmp_path / "walk"
    work.mkdir()
    script = script.replace(SCRATCH, str(work))
    home = tmp_path / "home"
    home.mkdir()
    with ssh_agent(tmp_path) as sock:
        env = {"HOME": str(home), "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
               "/sbin:/bin", "SSH_AUTH_SOCK": sock, "LANG": "C.UTF-8", "TERM": "dumb"}
        try:
            proc = subprocess.run(["bash", "-c", "set -euo pipefail\n" + script], cwd=ROOT,
                                  env=env, capture_output=True, text=True, timeout=600)
        finally:
            subprocess.run(["bash", "-c", ". .venv/bin/activate && clusterkit sandbox stop"],
                           cwd=ROOT, env=env, capture_output=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert len(re.findall(r"dist_sync rank \d/3 .* OK", out)) == 3, out[-4000:]
    assert "clusterkit " in out and "is gone" in out
