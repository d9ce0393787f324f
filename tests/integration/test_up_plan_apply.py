"""Observe -> plan -> apply, against moto in server mode (real HTTP): what `up` shows
before it asks is what `clusterkit plan` prints, line for line; a cluster changed while
the user read the question stops `up` with nothing changed; a saved plan (`plan --out`,
`up --plan`) applies as saved, is refused when the world (exit 1, each difference named)
or the spec's meaning (exit 2) changed since, and applied again changes nothing (saved
plans of clusters that exist: test_up_saved_plans.py). The question is answered by a
function standing in for the user (CliRunner's stdin is never a terminal); "another
hand" is a second `up` or a boto3 call made from inside that answer."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

import clusterkit
from clusterkit.cli.main import cli
from clusterkit.cluster.ops import uprecord
from clusterkit.cluster.provision import up as up_module
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.planning import do_plan
from clusterkit.cluster.provision.up import do_up
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, PlanDriftError, UsageError
from clusterkit.events import Collect, Kind
from clusterkit.plan.applycalls import apply_calls
from clusterkit.plan.spend import plan_lines
from clusterkit.spec import load
from tests import support
from tests.integration.conftest import REGION, Calls, leftovers, live_instances, write_spec


def _rt(calls: Calls | None, report=None) -> Runtime:
    session = boto3.Session(region_name=REGION)
    if calls is not None:
        session.events.register("before-call", calls.hook)
    return Runtime(session=session, report=report or (lambda _: None), poll=0.05)


def _shown_before_the_question(spec: str, calls: Calls) -> tuple[list[str], list[str]]:
    """What `up` showed before it asked (its info and warning lines, in order), and the
    mutating calls it had made by then (it is declined: nothing is made)."""
    seen = Collect()
    shown: list[str] = []

    def answer(question: str) -> bool:
        shown.extend(e.text for e in seen.events if e.kind in (Kind.INFO, Kind.WARNING))
        return False

    with pytest.raises(ClusterkitError, match="declined"):
        do_up(spec, rt=_rt(calls, seen), wait_ssh=False, confirm=answer)
    return shown, list(calls.mutating())


def test_up_shows_what_plan_prints_line_for_line(calls: Calls, tmp_path):
    spec = str(write_spec(tmp_path, count=2, extra="storage:\n  efs: {mount: /efs}\n"))
    planned = plan_lines(do_plan(spec, rt=_rt(None)))
    shown, mutating = _shown_before_the_question(spec, calls)
    assert shown == [line.lstrip().removeprefix("warning: ") for line in planned]
    assert mutating == []
    text = "\n".join(planned)
    for part in ("create the stack (security group, placement group, launch template, "
                 "node and controller roles, EFS file system)",
                 "launch 2 node(s)",
                 "root volumes: 2 x 8 GB gp3", "EFS file system (retain on down)",
                 "new spending: $"):
        assert part in text, part


def test_a_node_launched_while_the_user_reads_stops_up_with_nothing_changed(calls: Calls,
                                                                              tmp_path):
    name = support.unique_name("race")
    do_up(str(write_spec(tmp_path, name=name, count=2)), yes=True, rt=_rt(None),
          wait_ssh=False)
    grown = load(str(write_spec(tmp_path, name=name, count=3)))
    mine = str(write_spec(tmp_path, name=name, count=4))

    def answer(question: str) -> bool:  # another terminal's `up` grows it meanwhile
        up_module._up(_rt(None), grown, yes=True, wait_ssh=False)
        calls.reset()
        return True

    with pytest.raises(PlanDriftError) as caught:
        do_up(mine, rt=_rt(calls), wait_ssh=False, confirm=answer)
    assert caught.value.exit_code == 1
    assert "appeared, " in caught.value.message and name in caught.value.message
    assert "nothing was changed" in caught.value.hint
    assert "clusterkit down" not in caught.value.hint
    assert sorted(op for _, op in calls.log) == ["DescribeInstances", "DescribeStacks"]
    assert len(live_instances(name)) == 3  # the other `up`'s three, and no more
    do_down(mine, yes=True, rt=_rt(None))


def test_a_saved_plan_applies_as_saved_and_a_second_apply_changes_nothing(calls: Calls,
                                                                         tmp_path):
    spec = str(write_spec(tmp_path, count=2))
    name = load(spec).name
    out = str(tmp_path / "plan.json")
    planned = do_plan(spec, rt=_rt(calls), out=out)
    assert calls.mutating() == {}
    saved = json.loads((tmp_path / "plan.json").read_text())
    assert saved["lines"] == plan_lines(planned) and saved["made_from"] == spec
    assert saved["spec_file"] == Path(spec).name  # beside the plan
    result = do_up(None, plan_file=out, rt=_rt(calls), wait_ssh=False)
    assert len(result.nodes) == 2 and len(live_instances(name)) == 2
    last = uprecord.load(name)  # what `up --timeline` / `status --timeline` chart
    assert last is not None and last["ok"] is True
    assert {"key-pair", "stack", "launch"} <= {m.stage for m in last["marks"]
                                              if m.kind == "stage-started"}
    calls.reset()
    seen = Collect()  # applied again: the cluster is as the plan makes it
    again = do_up(None, plan_file=out, rt=_rt(calls, seen), wait_ssh=False)
    said = [e.text for e in seen.events if e.kind == Kind.INFO]
    assert f"{out} was already applied: the cluster is as the plan makes it, nothing to " \
           "change" in said
    assert not any("is gone" in text for text in said)
    assert calls.mutating() == {}
    assert {n.instance_id for n in again.nodes} == {n.instance_id for n in result.nodes}
    do_down(spec, yes=True, rt=_rt(None))
    assert leftovers(name) == {}


def test_a_saved_plan_whose_spec_changed_is_refused_before_any_call(calls: Calls, tmp_path):
    path = write_spec(tmp_path, count=2)
    out = str(tmp_path / "plan.json")
    do_plan(str(path), rt=_rt(None), out=out)
    path.write_text(path.read_text().replace("count: 2", "count: 3"))
    with pytest.raises(UsageError) as caught:
        do_up(None, plan_file=out, rt=_rt(calls), wait_ssh=False)
    assert caught.value.exit_code == 2 and "changed since" in caught.value.message
    assert calls.log == []


def test_plan_file_errors_exit_2_through_the_cli(moto_env, tmp_path, monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # the emulator's endpoint, no sandbox state
    bad = tmp_path / "bad.json"
    bad.write_text("{\"format\": \"something else\"}")
    spec = str(write_spec(tmp_path, count=1))
    for argv, words in ((["up", "--plan", str(tmp_path / "none.json")], "no plan file"),
                        (["up", "--plan", str(bad)], "is not a clusterkit plan file"),
                        (["up", spec, "--plan", str(bad)], "takes no SPEC"),
                        (["plan", spec, "--offline", "--out", str(bad)], "not with --offline")):
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 2, (argv, result.output)
        assert words in result.stderr, (argv, result.stderr)


@pytest.mark.parametrize("count,efs", [(2, True), (3, False)])
def test_up_makes_the_writes_its_plan_says(calls: Calls, tmp_path, count: int, efs: bool):
    """A saved plan of a first `up` (EFS or not), then a scale-out by one node: the AWS
    writes apply makes are those ``apply_calls`` reads from the plan, no more, no
    fewer (and `plan` names each)."""
    extra = "storage:\n  efs: {mount: /efs, deletion_policy: delete}\n" if efs else ""
    spec = str(write_spec(tmp_path, count=count, extra=extra))
    name = load(spec).name
    out = str(tmp_path / "plan.json")
    for grow in (0, 1):
        if grow:
            spec = str(write_spec(tmp_path, name=name, count=count + 1, extra=extra))
        planned = do_plan(spec, rt=_rt(None), out=out)
        calls.reset()
        do_up(None, plan_file=out, rt=_rt(calls), wait_ssh=False)
        assert calls.mutating() == apply_calls(planned), (grow, planned.to_json())
    do_down(spec, yes=True, rt=_rt(None))
    assert leftovers(name) == {}


def test_a_plan_of_another_clusterkit_version_is_refused_naming_both(calls: Calls, tmp_path):
    spec = str(write_spec(tmp_path, count=1))
    out = tmp_path / "plan.json"
    do_plan(spec, rt=_rt(None), out=str(out))
    saved = json.loads(out.read_text())
    saved["clusterkit"] = "0.0.1"
    out.write_text(json.dumps(saved))
    with pytest.raises(UsageError) as caught:
        do_up(None, plan_file=str(out), rt=_rt(calls), wait_ssh=False)
    assert caught.value.exit_code == 2 and calls.log == []
    assert "written by clusterkit 0.0.1" in caught.value.message
    assert f"this is clusterkit {clusterkit.__version__}" in caught.value.message
