"""bootstrap/run.py's node-side script, run here by ``sh`` with stand-in playbooks (texts
that only echo): steps in order, content on stdin intact, a stop at the first failed
step, "not emulated" (exit 3) skipped without stopping; and the playbooks shipped as
package data. The whole path against real nodes is tests/e2e/test_bootstrap.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

import tomllib

from clusterkit.bootstrap import run, steps
from clusterkit.bootstrap.run import Outcome, StepResult
from clusterkit.kinds import Market
from clusterkit.plan.nodes import Node
from clusterkit.remote.connect import Hop, Target
from clusterkit.remote.results import NodeResult

ROOT = Path(__file__).parents[2]
FAKE = {
    "say.sh": 'echo "$0 $*"; cat',
    "fail.sh": 'echo "broken: $1" >&2; exit 1',
    "md.sh": 'echo "mdadm: not emulated here" >&2; exit 3',
    "three.sh": 'echo "plain exit 3"; exit 3',
    "receipt.sh": 'echo "receipt $1"',
}


def _plan(step: str, *commands: steps.Command) -> steps.StepPlan:
    return steps.StepPlan(step, "run", "no receipt",
                          (*commands, steps.Command("receipt.sh", (step, "sha256:x"))))


def _run(*plans: steps.StepPlan) -> tuple[int, dict[str, tuple[int, str]]]:
    proc = subprocess.run(["sh", "-c", run.node_script(plans, FAKE)], capture_output=True,
                          text=True, timeout=30)
    return proc.returncode, run.parse_run(proc.stdout.splitlines())


def test_steps_run_in_order_with_their_stdin_intact():
    tricky = "line one\nCK_STDIN\n'quotes' $HOME `x`\n"
    code, done = _run(_plan("a", steps.Command("say.sh", ("x y", "--z"), tricky)),
                      _plan("b", steps.Command("say.sh", ("b",))))
    assert code == 0
    assert list(done) == ["a", "b"]
    assert done["a"] == (0, "say.sh x y --z\n" + tricky + "receipt a")
    assert done["b"] == (0, "say.sh b\nreceipt b")


def test_a_failed_step_stops_the_node_and_writes_no_receipt():
    code, done = _run(_plan("a", steps.Command("fail.sh", ("disk",))),
                      _plan("b", steps.Command("say.sh")))
    assert code == 1
    assert done == {"a": (1, "broken: disk")}


def test_not_emulated_is_skipped_and_the_next_step_runs():
    code, done = _run(_plan("scratch", steps.Command("md.sh")), _plan("b", steps.Command("say.sh")))
    assert code == 0
    assert done["scratch"] == (3, "mdadm: not emulated here")
    assert done["b"][0] == 0
    step = steps.StepPlan("scratch", "run", "no receipt", ())
    result = run._step_result(step, done, failed_before=False)
    assert result == StepResult("scratch", Outcome.SKIPPED, "mdadm: not emulated here",
                                "mdadm: not emulated here", executed=True)


def test_exit_3_without_not_emulated_is_a_failure():
    code, done = _run(_plan("a", steps.Command("three.sh")), _plan("b", steps.Command("say.sh")))
    assert code == 1 and list(done) == ["a"]
    result = run._step_result(steps.StepPlan("a", "run", "r", ()), done, failed_before=False)
    assert result.outcome is Outcome.FAILED and result.reason == "exit 3"


def test_steps_after_a_failure_are_not_run_and_done_ones_stay_done():
    node = Node("i-1", 1, "running", "c5.large", "us-east-1a", Market.ON_DEMAND, "us-east-1")
    target = Target(node, Hop("worker-1", "127.0.0.3"))
    plans = (steps.StepPlan("hostname", "done", "already done"),
             steps.StepPlan("hosts", "run", "forced"), steps.StepPlan("ssh", "run", "no receipt"),
             steps.StepPlan("scratch", "skip", "no disks"))
    said = NodeResult(node, "worker-1", "127.0.0.3", exit_code=1, stdout=(
        f"{run.BEGIN} hosts\nmkdir: cannot create directory\n\n{run.END} hosts 1\n"))
    failed = run._node_result(run._Planned(target, plans), said)
    assert [s.outcome for s in failed.steps] == [Outcome.DONE, Outcome.FAILED, Outcome.NOT_RUN,
                                                 Outcome.SKIPPED]
    assert not failed.ok and failed.failed_step is failed.steps[1]
    error = run.BootstrapError(run.BootstrapResult((failed,)))
    assert "worker-1: step hosts exit 1: mkdir: cannot create directory" in error.message
    assert error.result.bodies_run == 1 and error.exit_code == 1


def test_playbooks_are_package_data():
    shipped = steps.PLAYBOOKS_DIR
    assert shipped == ROOT / "clusterkit" / "resources" / "playbooks"
    assert shipped.resolve() == (ROOT / "playbooks").resolve()  # one copy in the repository
    names = sorted(p.name for p in (ROOT / "playbooks").glob("*.sh"))
    assert sorted(steps.read_playbooks()) == names and "receipt.sh" in names
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = data["tool"]["setuptools"]["package-data"]["clusterkit"]
    assert "resources/playbooks/*" in globs  # a wheel copies them in


def test_a_step_refused_while_planning_stops_the_node_and_names_node_and_step():
    """``network.efa: true`` on a node without EFA software: the efa step plans "fail";
    the steps before it run, none after it is sent, and the error names node and step."""
    node = Node("i-1", 1, "running", "p4d.24xlarge", "us-east-1a", Market.ON_DEMAND,
                "us-east-1")
    target = Target(node, Hop("worker-1", "127.0.0.3"))
    why = "network.efa is true: p4d.24xlarge supports EFA but ... no EFA software"
    plans = (_plan("ssh", steps.Command("say.sh")), steps.StepPlan("efa", "fail", why),
             _plan("scratch", steps.Command("say.sh")), steps.StepPlan("env", "skip", "none"))
    assert [p.step for p in run.to_run(plans)] == ["ssh"]
    assert plans[1].action is steps.StepAction.FAIL
    code, done = _run(*run.to_run(plans))
    said = NodeResult(node, "worker-1", "127.0.0.3", exit_code=code, stdout="".join(
        f"{run.BEGIN} {name}\n{out}\n{run.END} {name} {rc}\n" for name, (rc, out) in done.items()))
    result = run._node_result(run._Planned(target, plans), said)
    assert [s.outcome for s in result.steps] == [Outcome.RAN, Outcome.FAILED, Outcome.NOT_RUN,
                                                 Outcome.SKIPPED]
    assert result.failed_step is result.steps[1] and not result.steps[1].executed
    error = run.BootstrapError(run.BootstrapResult((result,)))
    assert f"worker-1: step efa {why}" in error.message and error.exit_code == 1


def test_a_skipped_step_carries_its_warning():
    """A p4d whose image has no EFA software: the efa step is skipped, and says why."""
    plan = steps.StepPlan("efa", "skip", "no EFA software on the image",
                          warning="p4d.24xlarge supports EFA but ...")
    result = run._step_result(plan, {}, failed_before=False)
    assert (result.outcome, result.warning) == (Outcome.SKIPPED, plan.warning)


def test_a_step_already_done_says_so_once_with_its_reason():
    """`up` printed `already done (already done (receipt matches))` (issue 36): the plan's
    reason is only the why, the outcome's own words come once."""
    from clusterkit.bootstrap import facts as nf
    from clusterkit.events import Collect

    playbooks = {name: "true" for name in FAKE}
    want = steps.Want(commands=(steps.Command("say.sh"),))
    key = steps.plan_step("ssh", want, nf.NodeFacts({"receipts": {}}), playbooks).digest
    plan = steps.plan_step("ssh", want, nf.NodeFacts({"receipts": {"ssh": key}}), playbooks)
    node = Node("i-1", 0, "running", "c5.large", "us-east-1a", Market.ON_DEMAND, "us-east-1")
    done = run._node_result(run._Planned(Target(node, Hop("master-0", "127.0.0.2")), (plan,)),
                            None)
    seen = Collect()
    run._report(seen, done)
    assert seen.texts() == ["master-0 ssh: already done (receipt matches)"]
