"""cluster/jobs/preflight.py without a cluster: each node's gather answered by the real
captures (tests/unit/preflight_cases: worker-1 with its row remap pending and DCGM's
failing rows, the master healthy), SSH and AWS replaced (what cannot run here: the
sandbox run is tests/e2e/test_train_preflight.py). What it decides: stop naming the
node, its evidence and what keeping it costs when no recovery is left; replace it and
check only the new one when one is; the all-reduce skipped without torch or with one
node."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs import preflight
from clusterkit.cluster.jobs.attempt import Job
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.errors import ClusterkitError
from clusterkit.kinds import Market
from clusterkit.plan.nodes import Node
from clusterkit.plan.recovery import Recovery
from clusterkit.remote.connect import Login
from clusterkit.spec import loads
from clusterkit.training import preflight as pre
from tests.unit.test_training_preflight import gathered

CASES = Path(__file__).parent / "preflight_cases"
SPEC = """\
name: c1
region: us-east-1
nodes: {count: 2, instance_types: [c5.large]}
train: {command: python3 train.py}
"""


def outputs(case: str) -> dict:
    return json.loads((CASES / f"{case}.json").read_text())["outputs"]


HEALTHY = {**outputs("healthy-p4de"), "torch": None}  # no torch: the all-reduce skipped
FAILING = {**HEALTHY, "smi_q": outputs("remapped-rows-pending")["smi_q"],
           "dcgmi": outputs("dcgm-fails")["dcgmi"]}
NEW = {**HEALTHY, "smi_q": None, "dcgmi": None}  # the replacement: a fresh c5.large


class Cluster(JobCluster):
    """A JobCluster whose nodes answer the gather with the given outputs."""

    answers: dict[str, dict] = {}

    def run(self, targets, calls, **options):
        assert all("dcgmi diag -r 1" in c.command for c in calls.values())
        return {t.hop.label: SimpleNamespace(stdout="\n".join(gathered(
            self.answers[t.hop.label])), ok=True) for t in targets}


def cluster(ids: tuple[str, str], answers: dict[str, dict]) -> Cluster:
    nodes = [Node(iid, i, "running", "c5.large", "us-east-1a", Market.ON_DEMAND,
                  "us-east-1", price=0.085) for i, iid in enumerate(ids)]
    targets = [SimpleNamespace(node=n, hop=SimpleNamespace(label=f"n{n.index}"))
               for n in nodes]
    jc = Cluster("c1", loads(SPEC), Login("c1"), nodes, targets)  # type: ignore[arg-type]
    jc.answers = {f"n{i}": a for i, a in enumerate(answers.values())}
    return jc


SAID: list[str] = []
RT = SimpleNamespace(started=lambda stage, text, **k: None,
                     done=lambda stage, text, **k: SAID.append(text),
                     warn=lambda text, **k: SAID.append(text),
                     info=lambda text, **k: SAID.append(text))


def job(jc: JobCluster) -> Job:
    assert jc.spec is not None
    return Job("c1.yaml", jc.spec, "python3 train.py", None, None)


def test_a_failing_node_with_no_recovery_left_is_named_with_its_evidence_and_cost():
    jc = cluster(("i-m", "i-w"), {"master": HEALTHY, "worker": FAILING})
    with pytest.raises(ClusterkitError) as stopped:
        preflight.run(RT, job(jc), jc, limit=0)  # type: ignore[arg-type]
    message = stopped.value.message
    assert message.splitlines()[0] == (
        "preflight: worker-1 (i-w) failed; no recovery left to replace it (none allowed: "
        "train.max_recoveries / --max-recoveries): the job was not started")
    assert message.splitlines()[1] == (
        "  worker-1: gpus: GPU 00000000:10:1C.0: remapped rows pending (reset the GPU to "
        "apply them); dcgm: dcgmi diag -r 1: Error: GPU 3 has uncorrectable memory errors "
        "and row remappings are pending; GPU Memory: Fail - GPU: 0")
    assert stopped.value.hint.startswith(
        "keeping worker-1 (i-w) costs $0.09/h (the cluster $0.17/h): replace it with "
        "`clusterkit train c1.yaml --preflight --max-recoveries 1`")


def test_a_failing_node_is_replaced_and_only_the_new_one_checked_again(monkeypatch):
    SAID.clear()
    jc = cluster(("i-m", "i-w"), {"master": HEALTHY, "worker": FAILING})
    new = cluster(("i-m", "i-new"), {"master": HEALTHY, "worker": NEW})
    replaced = []

    def replace_failed(rt, job_, failed, number, limit):
        replaced.append(([c.name for c in failed], number, limit))
        return Recovery(number, {"worker-1": "unhealthy"}, {"worker-1": ("i-w", "i-new")},
                        1.0, 1.0, preflight.JOB, 2)

    monkeypatch.setattr(preflight, "replace_failed", replace_failed)
    monkeypatch.setattr(jobs, "open_job_cluster", lambda *a, **k: new)
    checked = preflight.run(RT, job(jc), jc, limit=2)  # type: ignore[arg-type]
    assert replaced == [(["worker-1"], 1, 2)]
    assert checked.cluster is new and len(checked.recoveries) == 1
    record = checked.record
    assert [[c.name for c in r] for r in record.rounds] == [["master", "worker-1"],
                                                            ["worker-1"]]
    assert record.rounds[1][0].instance_id == "i-new" and record.ok
    assert record.replaced == ("worker-1 i-w -> i-new (unhealthy)",)
    assert record.all_reduce == pre.Verdict(
        pre.Check.ALL_REDUCE, pre.Status.SKIPPED,
        "no torch in the job's interpreter on the nodes (train.python / train.packages): "
        "the all-reduce test runs under torchrun")
    assert SAID[0] == "preflight: master: ok (gpus pass, dcgm pass, efa skipped, dataset skipped)"
    assert SAID[1].startswith("preflight: worker-1 (i-w): FAIL gpus: GPU 00000000:10:1C.0")
    assert SAID[2] == ("preflight: worker-1: ok (gpus skipped, dcgm skipped, efa skipped, "
                       "dataset skipped)")


def test_the_all_reduce_needs_two_nodes_and_torch():
    jc = cluster(("i-m", "i-w"), {"master": HEALTHY, "worker": HEALTHY})
    verdict, culprit = preflight.all_reduce(RT, job(jc), jc, False, None)  # type: ignore[arg-type]
    assert verdict is not None and verdict.status is pre.Status.SKIPPED and culprit is None
    one = cluster(("i-m", "i-w"), {"master": HEALTHY, "worker": HEALTHY})
    one.nodes.pop()
    verdict, _ = preflight.all_reduce(RT, job(one), one, True, None)  # type: ignore[arg-type]
    assert verdict is not None and verdict.evidence.startswith("one node")


def test_what_a_node_should_have_comes_from_its_type_and_the_spec():
    jc = cluster(("i-m", "i-w"), {"master": HEALTHY, "worker": HEALTHY})
    p4d = Node("i-p", 0, "running", "p4d.24xlarge", "us-east-1a", Market.SPOT, "us-east-1")
    assert preflight.expect_of(jc, p4d) == pre.Expect("p4d.24xlarge", 8, 4, "", None,
                                                      125.0, False)
    data = loads(SPEC.replace("train:", "network: {efa: 'false'}\nstorage: {dataset: "
                              "{snapshot: snap-0123456789abcdef0, throughput: 250}}\ntrain:"))
    off = JobCluster("c1", data, Login("c1"), [p4d], [])
    assert preflight.expect_of(off, p4d) == pre.Expect(
        "p4d.24xlarge", 8, 0, "network.efa: false (p4d.24xlarge has 4)", "/data", 250.0,
        True)


def test_an_all_reduce_that_fails_on_a_node_names_it_once_every_node_has_torch(monkeypatch):
    torch = {**HEALTHY, "torch": {"lines": ["torch"]}}
    jc = cluster(("i-m", "i-w"), {"master": torch, "worker": torch})
    failed = SimpleNamespace(node="worker-1", tail=("RuntimeError: NCCL error",),
                             describe=lambda: "torchrun torchrun-0 on worker-1 exited 1")
    ran = []

    def measure(rt, jc_, command, **kwargs):
        ran.append(command)
        return SimpleNamespace(outcome=SimpleNamespace(ok=False, failed=failed))

    monkeypatch.setattr(preflight.nccltest, "measure", measure)
    with pytest.raises(ClusterkitError) as stopped:
        preflight.run(RT, job(jc), jc, limit=0)  # type: ignore[arg-type]
    assert ran == ["python3 nccl_allreduce.py"]
    assert stopped.value.message.splitlines()[1] == (
        "  worker-1: all_reduce: the all-reduce test: torchrun torchrun-0 on worker-1 "
        "exited 1: RuntimeError: NCCL error")
    ran.clear()
    no_torch = cluster(("i-m", "i-w"), {"master": torch, "worker": HEALTHY})
    checked = preflight.run(RT, job(no_torch), no_torch, limit=0)  # type: ignore[arg-type]
    assert ran == [] and checked.record.all_reduce is not None
    assert checked.record.all_reduce.status is pre.Status.SKIPPED
