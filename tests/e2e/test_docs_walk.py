"""Every shell block titled ``sandbox session`` runs as printed, in order, in one bash
(`set -euo pipefail`), from the repository root, as a new user would type them: README's
quickstart first (start the sandbox, bring the example cluster up, train on it, tear it
down), then the docs site's pages in the order of its nav (mkdocs.yml): the tutorial
activates the environment, starts the sandbox, validates and plans the examples, brings
the example cluster up, reaches the nodes, packs/publishes/deploys a dataset, trains on
it and tears it all down. The one change to the text: ``/tmp/ck-walk`` (the blocks'
scratch directory) is this test's own temporary directory.

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
BLOCK = re.compile(r'^```bash title="sandbox session"\n(.*?)^```$', re.S | re.M)
SCRATCH = "/tmp/ck-walk"


def sandbox_blocks(text: str) -> list[str]:
    return BLOCK.findall(text)


def session_pages() -> list[Path]:
    """README, then every page of the site's nav, in the order a reader meets them."""
    docs = support.load_script("docs")
    return [ROOT / "README.md", *(ROOT / "docs" / page for page in docs.nav_pages())]


def walk() -> str:
    return "\n".join(block for page in session_pages()
                     for block in sandbox_blocks(page.read_text()))


def test_the_docs_mark_the_walk():
    readme = "\n".join(sandbox_blocks((ROOT / "README.md").read_text()))
    tutorial = "\n".join(sandbox_blocks((ROOT / "docs/tutorial/sandbox.md").read_text()))
    for command in ("sandbox start", "up examples/sandbox-cpu.yaml", "train", "down sandbox",
                    "sandbox stop"):
        assert f"clusterkit {command}" in readme, command
    for command in ("sandbox start", "up examples/sandbox-cpu.yaml", "deploy-dataset",
                    "train", "down sandbox", "sandbox stop"):
        assert f"clusterkit {command}" in tutorial, command
    # no sandbox session outside the pages the walk reads (a page left out of the nav)
    marked = {p for p in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
              if sandbox_blocks(p.read_text())}
    assert marked <= set(session_pages())


def test_the_walk_runs_as_printed(tmp_path: Path):
    support.require_root("the sandbox's SSH nodes")
    script = walk()
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
                                  env=env, capture_output=True, text=True, timeout=900)
        finally:
            subprocess.run(["bash", "-c", ". .venv/bin/activate && clusterkit sandbox stop"],
                           cwd=ROOT, env=env, capture_output=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    trainings = len(re.findall(r"^clusterkit train ", script, re.M))
    assert trainings == 2  # README's quickstart, the tutorial
    assert len(re.findall(r"dist_sync rank \d/3 .* OK", out)) == 3 * trainings, out[-4000:]
    assert "clusterkit " in out and "is gone" in out
