"""training/preflight.py and preflight_facts.py as data: each file in preflight_cases/
is one node's gathered output (real captures from tests/data/node-captures, copies of
../shared/data/node-captures; a case that had to derive or write one says how in its
``derived``) in, the verdict per check out; run by the one loop below. The outputs go
through the gather script's own framing (``preflight_facts.parse_node``), as a
node's answer does.

A case: ``instance_type`` (the catalog gives the GPUs and EFA expected), optional
``dataset`` ({mount, throughput, lazy}) and ``efa_off``; ``outputs``: fact name ->
null (the command failed: the fact's default) or {capture | lines, edits, drop_last_lines};
``expect``: check -> [status, text the evidence holds]. An ``all_reduce`` case names a
table capture, the nominal Gbit/s and whether the nodes are on EFA."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clusterkit.bootstrap.facts import BEGIN, END
from clusterkit.catalog.instances import lookup
from clusterkit.node import gpuwatch
from clusterkit.training import allreduce
from clusterkit.training import preflight as pre
from clusterkit.training import preflight_facts as pf

CASES = sorted((Path(__file__).parent / "preflight_cases").glob("*.json"))
CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"


def output(given: dict[str, Any]) -> list[str]:
    """A fact's output lines: a capture (edited as the case says) or the lines written."""
    if "capture" not in given:
        return list(given["lines"])
    text = (CAPTURES / given["capture"]).read_text()
    for old, new in given.get("edits", []):
        assert old in text, f"{given['capture']}: no {old!r} to edit"
        text = text.replace(old, new)
    lines = text.splitlines()
    return lines[:len(lines) - given.get("drop_last_lines", 0)]


def gathered(outputs: dict[str, Any]) -> list[str]:
    """What the gather script prints for these outputs: null -> exit 3 (not there)."""
    lines: list[str] = []
    for name, given in outputs.items():
        lines += [f"{BEGIN} {name}", *(output(given) if given else []),
                  "", f"{END} {name} {3 if given is None else 0}"]
    return lines


def expectation(case: dict[str, Any]) -> pre.Expect:
    itype = lookup(case["instance_type"])
    assert itype is not None
    dataset = case.get("dataset") or {}
    off = case.get("efa_off", False)
    return pre.Expect(itype.name, itype.gpu_count, 0 if off else itype.efa_interfaces,
                      "network.efa: false" if off else "", dataset.get("mount"),
                      dataset.get("throughput", 125), dataset.get("lazy", False))


def verdicts(case: dict[str, Any]) -> dict[str, pre.Verdict]:
    if "all_reduce" in case:
        run = case["all_reduce"]
        table = allreduce.parse_all_reduce(output(run))
        bw = allreduce.bandwidth_verdict(table, run["nominal_gbps"], efa=run["efa"])
        return {"all_reduce": pre.judge_all_reduce(bw, run["efa"])}
    expect = expectation(case)
    facts = pf.preflight_facts(expect.dataset_mount, ("python3",))
    parsed = pf.parse_node(gathered(case["outputs"]), facts)
    return {v.check.value: v for v in pre.judge_node(parsed, expect)}


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_case(path: Path):
    case = json.loads(path.read_text())
    found = verdicts(case)
    for check, (status, text) in case["expect"].items():
        assert found[check].status.value == status, (check, found[check])
        assert text in found[check].evidence, (check, found[check].evidence)


def test_the_cases_cover_every_check_and_status():
    seen = set()
    for path in CASES:
        case = json.loads(path.read_text())
        seen |= {(c, s) for c, (s, _t) in case["expect"].items()}
    assert {c for c, _s in seen} == {c.value for c in pre.Check}
    assert {s for _c, s in seen} == {s.value for s in pre.Status}


def test_a_derived_output_says_so():
    """Every output not taken verbatim from a capture (edited, cut or written) says how
    it was made."""
    for path in CASES:
        case = json.loads(path.read_text())
        for given in [*case.get("outputs", {}).values(), case.get("all_reduce")]:
            if given and ("edits" in given or "drop_last_lines" in given or "lines" in given
                          and given["lines"] and given["lines"] != ["torch"]):
                assert given.get("derived"), (path.name, given)


def test_the_kernel_lines_are_the_watchers():
    assert pf.GPU_LINE == gpuwatch.GPU_LINE and pf.KEEP_LINES == gpuwatch.KEEP_LINES


def test_a_record_reads_back_and_says_its_lines():
    healthy = pre.NodeCheck(0, "master", "i-0", (pre.Verdict(pre.Check.GPUS, pre.Status.PASS,
                                                             "8 of 8 GPU(s)"),))
    sick = pre.NodeCheck(1, "worker-1", "i-1", (pre.Verdict(
        pre.Check.DCGM, pre.Status.FAIL, "dcgmi diag -r 1: GPU Memory: Fail - GPU: 0"),))
    new = pre.NodeCheck(1, "worker-1", "i-2", healthy.verdicts)
    record = pre.Preflight(((healthy, sick), (new,)), None,
                           ("recovery 1: worker-1 replaced",))
    assert record.ok and not pre.Preflight(((healthy, sick),)).ok
    assert pre.Preflight.from_json(json.loads(json.dumps(record.to_json()))) == record
    assert pre.lines(record) == [
        "preflight round 1 (every node):", "  master: ok (gpus pass)",
        "  worker-1 (i-1): FAIL dcgm: dcgmi diag -r 1: GPU Memory: Fail - GPU: 0",
        "  replaced: recovery 1: worker-1 replaced",
        "preflight round 2 (the replacement(s)):", "  worker-1: ok (gpus pass)"]


def test_the_dataset_read_stops_and_measures_a_slow_volume():
    command = pf.dataset_read("/data").command
    assert "--mountpoint /data" in command and "iflag=direct" in command
    assert f"timeout -s INT {pf.READ_TIMEOUT_S} dd" in command
    assert pf.torch_fact(("/usr/bin/python3", "-u")).command.startswith("/usr/bin/python3 -u -c")
