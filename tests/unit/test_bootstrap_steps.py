"""Bootstrap steps as data (pyinfra's tests/operations/ form): every
bootstrap_steps/*.json names a step, the node index, spec overrides (merged into BASE_SPEC;
a null removes a key), the cluster (default: CLUSTER; its ``instance_type`` is every
node's), the node facts as raw command
output (a list of lines, null for "the command failed", or {"case": NAME} to reuse the
output of bootstrap_facts/NAME.json) and the expected plan: ``action`` (run, done, skip,
or fail: refused while planning), ``reason`` and
``commands`` ({playbook, args, stdin}) and the ``warning`` the user is shown (none when
absent), or an ``exception``. ``$digest`` stands for the
digest the step computes (in a receipt it means "the receipt matches"). A fact the step
reads but the case does not stub raises FactNotGathered: the case fails loudly."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterkit.bootstrap import facts as nf
from clusterkit.bootstrap import steps
from clusterkit.spec import loads
from tests.support import merge

HERE = Path(__file__).parent
CASES = sorted((HERE / "bootstrap_steps").glob("*.json"))
PLAYBOOKS = steps.read_playbooks()
BASE_SPEC: dict[str, Any] = {
    "name": "demo", "region": "us-east-1",
    "nodes": {"count": 3, "instance_types": ["p4d.24xlarge"]},
    "ssh": {"user": "ubuntu"},
}
KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI"
CLUSTER: dict[str, Any] = {
    "name": "demo", "region": "us-east-1", "gpus_per_node": 8, "efs_id": None,
    "instance_type": "p4d.24xlarge",  # every node's, as BASE_SPEC's
    "nodes": [{"address": f"10.0.1.{5 + i}", "host_key": f"{KEY}{'ABC'[i] * 32}"}
              for i in range(3)],
}


def dataset_view(data: dict[str, Any] | None) -> steps.DatasetView | None:
    """``{"mount", "volumes": {"INDEX": "vol-…"}, "manifest_sha256", "verify", "prewarm"}``."""
    if data is None:
        return None
    volumes = {int(index): vol for index, vol in data.get("volumes", {}).items()}
    return steps.DatasetView(data["mount"], volumes, data.get("manifest_sha256"),
                             data.get("verify", "size"), data.get("prewarm", False))


def cluster_view(data: dict[str, Any]) -> steps.ClusterView:
    return steps.ClusterView(
        data["name"], data["region"],
        tuple(steps.NodeView(i, n["address"], n.get("host_key"),
                             n.get("instance_type", data.get("instance_type")))
              for i, n in enumerate(data["nodes"])),
        data.get("gpus_per_node", 0), data.get("efs_id"), dataset_view(data.get("dataset")))


def outputs(case: dict[str, Any], digest: str) -> dict[str, list[str] | None]:
    out: dict[str, list[str] | None] = {}
    for name, value in case["facts"].items():
        if isinstance(value, dict):
            value = json.loads((HERE / "bootstrap_facts" / f"{value['case']}.json")
                               .read_text())["output"]
        out[name] = None if value is None else [v.replace("$digest", digest) for v in value]
    return out


def plan(case: dict[str, Any]) -> steps.StepPlan:
    spec = loads(yaml.safe_dump(merge(BASE_SPEC, case.get("spec", {}))))
    cluster = cluster_view(merge(CLUSTER, case.get("cluster", {})))
    fn = dict(steps.STEPS)[case["step"]]
    index = case.get("index", 1)
    force = case.get("force", False)

    def once(digest: str) -> steps.StepPlan:
        facts = nf.from_outputs(outputs(case, digest))
        return steps.plan_step(case["step"], fn(facts, spec, cluster, index), facts,
                               PLAYBOOKS, force)
    first = once("$digest")  # the digest does not depend on the receipts
    return once(first.digest or "")


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_step_plans_as_expected(path: Path):
    case = json.loads(path.read_text())
    assert case["step"] in steps.STEP_NAMES, path.name
    if "exception" in case:
        with pytest.raises(getattr(nf, case["exception"])):
            plan(case)
        return
    result = plan(case)
    expect = case["expect"]
    assert (result.action, result.reason) == (expect["action"], expect["reason"])
    assert result.warning == expect.get("warning", "")
    want = [{**c, "args": [a.replace("$digest", result.digest or "") for a in c["args"]]}
            for c in expect.get("commands", [])]
    assert [c.plain() for c in result.commands] == want
    if result.action == "run":
        assert result.commands[-1].playbook == "receipt.sh"
        assert result.commands[-1].args == (case["step"], result.digest)


def test_every_step_has_cases():
    covered = {json.loads(p.read_text())["step"] for p in CASES}
    assert covered == set(steps.STEP_NAMES)


def test_every_command_names_a_playbook():
    for path in CASES:
        for command in json.loads(path.read_text()).get("expect", {}).get("commands", []):
            assert command["playbook"] in PLAYBOOKS, (path.name, command["playbook"])


def test_digest_changes_with_playbook_text_args_stdin_and_boot():
    cmd = steps.Command("hosts.sh", ("--rank", "1"), "10.0.1.5 a\n")
    base = steps.digest([cmd], PLAYBOOKS)
    assert base.startswith("sha256:") and len(base) == 7 + 64
    assert steps.digest([cmd], {**PLAYBOOKS, "hosts.sh": PLAYBOOKS["hosts.sh"] + "#"}) != base
    assert steps.digest([steps.Command("hosts.sh", ("--rank", "2"), cmd.stdin)],
                        PLAYBOOKS) != base
    assert steps.digest([steps.Command("hosts.sh", cmd.args, "10.0.1.6 a\n")],
                        PLAYBOOKS) != base
    assert steps.digest([cmd], PLAYBOOKS, "boot-2") != steps.digest([cmd], PLAYBOOKS, "boot-1")
    assert steps.digest([cmd], PLAYBOOKS) == base


def test_plan_node_orders_steps_and_refuses_unknown_force():
    spec = loads(yaml.safe_dump(BASE_SPEC))
    facts = nf.from_outputs({f.name: None for f in nf.ALL})
    plans = steps.plan_node(facts, spec, cluster_view(CLUSTER), 0, PLAYBOOKS)
    assert [p.step for p in plans] == list(steps.STEP_NAMES)
    assert [p.action for p in plans] == ["run", "run", "run", "skip", "skip", "skip", "skip",
                                         "skip"]
    assert plans[3].step == "efa" and "no EFA software" in plans[3].warning
    with pytest.raises(ValueError, match="no bootstrap step nope"):
        steps.plan_node(facts, spec, cluster_view(CLUSTER), 0, PLAYBOOKS, force=["nope"])


def test_cluster_view_wants_indexes_in_order():
    with pytest.raises(ValueError, match="0..N-1"):
        steps.ClusterView("demo", "us-east-1", (steps.NodeView(0, "10.0.0.1"),
                                                steps.NodeView(2, "10.0.0.3")))


def test_command_shell_runs_the_playbook_text_with_sudo():
    line = steps.Command("receipt.sh", ("hosts", "sha256:" + "0" * 64)).shell("echo hi")
    assert line == f"sudo -n bash -c 'echo hi' receipt.sh hosts sha256:{'0' * 64}"


VOL = "vol-0123456789abcdef0"


def _dataset_plan(**view: Any) -> steps.StepPlan:
    spec = loads(yaml.safe_dump(BASE_SPEC))
    cluster = steps.ClusterView("demo", "us-east-1", (steps.NodeView(0, "10.0.1.5"),),
                                dataset=steps.DatasetView("/data", {0: VOL}, **view))
    facts = nf.from_outputs({"disks_by_id": None, "mounts": None, "receipts": None})
    return steps.plan_step("dataset", steps.want_dataset(facts, spec, cluster, 0), facts,
                           PLAYBOOKS)


def test_dataset_digest_covers_verify_mode_manifest_and_prewarm():
    size = _dataset_plan()
    assert size.action == "run" and size.commands[0].args[-2:] == ("--verify", "size")
    digests = {size.digest, _dataset_plan(verify="full").digest,
               _dataset_plan(verify=steps.Verify.FULL, prewarm=True).digest,
               _dataset_plan(manifest_sha256="ab" * 32).digest}
    assert len(digests) == 4
    assert _dataset_plan(verify="size").digest == size.digest
    assert "--prewarm" in _dataset_plan(prewarm=True).commands[0].args
    assert "--prewarm" not in size.commands[0].args


@pytest.mark.parametrize("bad", [
    {"mount": "data"}, {"mount": "/"}, {"mount": "/data/../etc"}, {"mount": "/da ta"},
    {"volumes": {0: "vol-1; rm -rf /"}}, {"volumes": {0: "snap-0123456789abcdef0"}},
    {"manifest_sha256": "sha256:" + "ab" * 32}, {"verify": "quick"}])
def test_dataset_view_refuses_what_would_reach_a_command_line(bad: dict[str, Any]):
    args: dict[str, Any] = {"mount": "/data", "volumes": {0: VOL}, **bad}
    with pytest.raises(ValueError):
        steps.DatasetView(**args)


def test_dataset_view_takes_a_trailing_slash_and_plain_strings():
    view = steps.DatasetView("/data/", {0: VOL}, verify="full")
    assert view.mount == "/data" and view.verify is steps.Verify.FULL
