"""`train --preflight` in the sandbox: a 2-node c5.large cluster whose nodes carry
stand-in ``nvidia-smi`` and ``dcgmi`` (the sandbox has no GPU: these are what cannot run
here, so they print real captures). The master's print a healthy ``nvidia-smi -q`` (the
real A100 capture with its pending row remap edited to No: no healthy one is recorded)
and the real passing ``dcgmi diag`` table; worker-1's print the real capture with its
row remap pending and the real failing ``dcgmi diag`` rows. Everything else is real: the
gather over SSH as root, the kernel log, fi_info (absent: no EFA), the replacement
(terminated, launched and bootstrapped again by `up`) and the MXNet job after it.

With no recovery left (``--max-recoveries 0``), `train` exits 1 naming worker-1, its
evidence and what keeping it costs, and starts nothing; with one (``train.preflight: true``, ``max_recoveries: 1``
in the spec), worker-1 is replaced, the new one (no stand-ins: a fresh root) passes, the
job runs, and its report keeps both rounds."""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs.nodejobs import open_job_cluster
from tests import support
from tests.e2e.clusters import running, user_session
from tests.e2e.test_train import DIST_SYNC, Cluster, new_cluster
from tests.integration.conftest import runtime
from tests.unit.test_training_preflight import output

CASES = Path(__file__).parents[1] / "unit" / "preflight_cases"
RESULT = "RESULT"


def case_output(case: str, fact: str) -> str:
    """A preflight case's output of ``fact`` (the real capture, edited as it says)."""
    return "\n".join(output(json.loads((CASES / f"{case}.json").read_text())["outputs"][fact]))


def stand_in(name: str, argument: str, text: str) -> str:
    """Shell text writing /usr/local/bin/``name``: ``text`` when called with ``argument``
    first (``-q``, ``diag``), else "has failed" and exit 9 (as the sampler's
    ``--query-gpu`` gets on a node without a driver)."""
    script = (f"#!/bin/sh\n[ \"$1\" = {argument} ] || {{ echo '{name} has failed' >&2; "
              f"exit 9; }}\ncat <<'CAPTURE'\n{text}\nCAPTURE\n")
    return (f"printf '%s' {shlex.quote(script)} > /usr/local/bin/{name} && "
            f"chmod 755 /usr/local/bin/{name}")


def as_root(text: str) -> str:
    """``text`` run by sh as root (the login user is root, or has passwordless sudo)."""
    quoted = shlex.quote(text)
    return f'if [ "$(id -u)" -eq 0 ]; then sh -c {quoted}; else sudo -n sh -c {quoted}; fi'


def install_stand_ins(cluster: Cluster) -> None:
    """The healthy tools on the master, the failing ones on worker-1 (whichever instance
    holds the name now)."""
    healthy = {"nvidia-smi": case_output("healthy-p4de", "smi_q"),
               "dcgmi": case_output("healthy-p4de", "dcgmi")}
    failing = {"nvidia-smi": case_output("remapped-rows-pending", "smi_q"),
               "dcgmi": case_output("dcgm-fails", "dcgmi")}
    for node, tools in (("master", healthy), ("worker-1", failing)):
        commands = [stand_in("nvidia-smi", "-q", tools["nvidia-smi"]),
                    stand_in("dcgmi", "diag", tools["dcgmi"])]
        do_exec(cluster.name, [as_root(" && ".join(commands))], nodes=[node], rt=runtime())


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("preflight")
    cl = new_cluster(where, support.unique_name("pf"), count=2)
    (cl.work / "dist_sync.py").write_text(DIST_SYNC)
    with user_session(sandbox, where), running(cl.spec, cl.name):
        yield cl


def worker_id(cluster: Cluster) -> str:
    """worker-1's instance id now."""
    nodes = open_job_cluster(runtime(), cluster.name).nodes
    return next(n.instance_id for n in nodes if n.index == 1)


def test_a_failing_node_with_no_recovery_left_stops_train(cluster: Cluster):
    install_stand_ins(cluster)
    before = worker_id(cluster)
    proc = cluster.cli("train", str(cluster.spec), "--preflight", "--max-recoveries", "0",
                       "--workdir", str(cluster.work))  # 0 whatever the spec says by now
    said = proc.stdout + proc.stderr
    assert proc.returncode == 1, said
    assert "preflight: master: ok (gpus pass, dcgm pass, efa skipped, dataset skipped)" \
        in said
    assert f"worker-1 ({before}) failed; no recovery left" in said
    assert ("gpus: GPU 00000000:10:1C.0: remapped rows pending (reset the GPU to apply "
            "them)") in said
    assert ("dcgm: dcgmi diag -r 1: Error: GPU 3 has uncorrectable memory errors and row "
            "remappings are pending; GPU Memory: Fail - GPU: 0") in said
    assert f"keeping worker-1 ({before}) costs $" in said
    assert RESULT not in said and cluster.active() == []  # no job started
    assert worker_id(cluster) == before  # nothing replaced


def test_a_failing_node_is_replaced_and_the_job_runs(cluster: Cluster):
    install_stand_ins(cluster)
    before = worker_id(cluster)
    if "preflight: true" not in cluster.spec.read_text():
        cluster.spec.write_text(cluster.spec.read_text() + "  preflight: true\n"
                                "  max_recoveries: 1\n")
    proc = cluster.cli("train", str(cluster.spec), "--workdir", str(cluster.work),
                       timeout=600)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    after = worker_id(cluster)
    assert after != before
    assert f"preflight: worker-1 ({before}): FAIL gpus: GPU 00000000:10:1C.0" in said
    assert "job preflight lost worker-1 (unhealthy): replacing only that node" in said
    assert "preflight: worker-1: ok (gpus skipped, dcgm skipped" in said  # the new one
    assert said.count(RESULT) == 2, said  # the job ran on both nodes
    job = json.loads(cluster.cli("--json", "job", cluster.name).stdout)
    kept = job["report"]["preflight"]
    assert [[n["name"] for n in r] for r in kept["rounds"]] == [["master", "worker-1"],
                                                                ["worker-1"]]
    assert kept["replaced"] == [f"worker-1 {before} -> {after} (unhealthy)"]
    assert kept["all_reduce"]["status"] == "skipped"  # no torch in the sandbox's jobs
