"""The spending cap end to end in the sandbox (``train.max_cost`` / ``--max-cost``):
two c5.large nodes at the catalog's on-demand $0.085/h each, a cap of $0.002 (about
42 s of the cluster): `plan` says what the cap buys; `train` (the CLI) says the spend
as it goes, the job's worker gets the checkpoint signal at the margin, saves and
exits, and the job ends as ``budget`` with the amount, in `train`'s output and in the
report `job` reads back. Nothing is mocked; the prices are the catalog's own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs.nodejobs import job_summary
from tests import support
from tests.e2e.clusters import running, sandbox_spec, user_session
from tests.integration.conftest import runtime

CLI = str(Path(sys.executable).with_name("clusterkit"))

CAP = "0.002"
SECTIONS = """\
train:
  framework: mxnet
  python: /usr/bin/python3
  command: python3 spend.py
  servers_per_node: 1
  workers_per_node: 1
  env: {{OMP_NUM_THREADS: 1, PYTHONPATH: {site}}}
  packages: []
  checkpoint_grace: 4
  max_cost: {cap}
"""
# A worker that steps until the checkpoint signal, then says it saved and exits 0, as a
# training script's handler would.
SPEND = textwrap.dedent("""\
    import signal, sys, time
    step = 0
    def save(*_):
        print("checkpoint saved at step", step, flush=True)
        sys.exit(0)
    signal.signal(signal.SIGUSR1, save)
    while True:
        step += 1
        print("step", step, flush=True)
        time.sleep(1)
""")


@dataclass
class Cluster:
    name: str
    spec: Path
    work: Path

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, env=os.environ.copy())


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("budget")
    name = support.unique_name("bg")
    spec = where / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=2, instance_type="c5.large", extra=SECTIONS.format(
        site=sysconfig.get_paths()["purelib"], cap=CAP)))
    work = where / "work"
    work.mkdir()
    (work / "spend.py").write_text(SPEND)
    cl = Cluster(name, spec, work)
    with user_session(sandbox, where), running(cl.spec, cl.name):
        yield cl


def flat(text: str) -> str:
    """``text`` with its line breaks as spaces: `plan`, `job` and `top` wrap a long line
    at the terminal's width (80 columns where there is none)."""
    return " ".join(text.split())


def test_plan_says_what_the_cap_buys(cluster: Cluster):
    got = cluster.cli("plan", str(cluster.spec))
    assert got.returncode == 0, got.stderr
    text = got.stdout + got.stderr
    print(text)
    assert ("train.max_cost $0.0020 buys 42 s of the job at the worst case $0.1700/h "
            "(2 x the dearest allowed type on-demand)") in flat(text)


def test_a_job_reaching_its_cap_checkpoints_and_ends_as_budget(cluster: Cluster):
    got = cluster.cli("train", str(cluster.spec), "--workdir", str(cluster.work),
                      "--max-cost", CAP, timeout=300)
    text = got.stdout + got.stderr
    print(text)
    assert got.returncode == 1, text  # the job did not finish: a stop, said as an error
    job_id = re.search(r"job (j-\S+) budget: spending cap: spent \$0\.00\d\d of the "
                       r"\$0\.0020 cap \(train\.max_cost\)", text)
    assert job_id, text
    assert re.search(r"^\[budget\] spent \$0\.0\d+ of the \$0\.0020 cap \(\d+%\), "
                     r"\$0\.1700/h now; checkpoint at \$0\.00\d+$", text, re.M), text
    assert "the checkpoint signal to every process, the job stops as budget in 4 s" in text
    for node in ("master", "worker-1"):  # every worker got the signal and saved
        assert re.search(rf"^\[{node}/worker-0\] checkpoint saved at step \d+$", text,
                         re.M), text
    spent = re.search(r"^\s+budget: spent \$(0\.\d+) of the \$0\.0020 cap \(train\.max_cost"
                      r"\), every instance the job used; stopped by the cap after the "
                      r"checkpoint signal$", text, re.M)
    assert spent and float(spent.group(1)) <= float(CAP), text  # stopped before the cap
    assert f"job {job_id.group(1)} on cluster {cluster.name}: budget" in text
    kept = cluster.cli("job", cluster.name, job_id.group(1))
    assert kept.returncode == 0, kept.stderr
    assert flat(spent.group(0)) in flat(kept.stdout + kept.stderr)


def test_a_detached_job_keeps_to_its_cap_through_the_controller(cluster: Cluster):
    """`train --detach` with a cap (and no recoveries) leaves the controller on the
    master; with no client connected it reads the job's budget.json, applies the same
    decision, and the job ends as budget with the amount; the controller keeps the
    report, spend against the cap in it."""
    got = cluster.cli("train", str(cluster.spec), "--workdir", str(cluster.work),
                      "--detach", "--max-cost", CAP, timeout=300)
    assert got.returncode == 0, got.stdout + got.stderr
    job_id = got.stdout.strip().splitlines()[-1]
    top = cluster.cli("top", cluster.name, "--once")  # while it runs: spend against the cap
    print(top.stdout + top.stderr)
    assert top.returncode == 0, top.stderr
    assert re.search(r"(^| )budget: spent \$0\.0\d+ of the \$0\.0020 cap \(\d+%\), "
                     r"\$0\.1700/h now; checkpoint at \$0\.00\d+( |$)",
                     flat(top.stdout + top.stderr)), top.stdout + top.stderr

    def ended() -> bool:
        summary = job_summary(runtime(), cluster.name)
        return summary is not None and summary.job_id == job_id and summary.state.final

    support.wait_for(ended, f"job {job_id} ended", 240, interval=2)
    summary = job_summary(runtime(), cluster.name)
    assert summary is not None and summary.state == "budget", summary
    assert re.fullmatch(r"spending cap: spent \$0\.00\d\d of the \$0\.0020 cap "
                        r"\(train\.max_cost\), \$0\.1700/h", summary.reason or ""), summary

    def reported() -> str:
        kept = cluster.cli("job", cluster.name, job_id)
        text = kept.stdout + kept.stderr
        return flat(text) if "  budget: spent" in text else ""

    support.wait_for(reported, "the controller's report", 120, interval=2)
    assert "stopped by the cap after the checkpoint signal" in reported()
    [log] = do_exec(cluster.name, ["cat ~/.clusterkit/controller/controller.log"],
                    nodes=["master"], rt=runtime()).values()
    print(log.stdout)
    assert f"job {job_id} budget: spending cap: spent $0.00" in log.stdout, log.stdout
