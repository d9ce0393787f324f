"""Saved plans of clusters that exist, against moto in server mode (real HTTP): `plan
--out` of a no-op, a scale-out and a replacement saves, and `up --plan` applies exactly
that; the plan applies from another directory (the spec moved with it, or left where it
was made) and from another working directory; a spec changed only in its comments still
takes its plan."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import boto3
import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.planning import do_plan
from clusterkit.cluster.provision.up import do_up
from clusterkit.spec import load
from tests.integration.conftest import (
    REGION,
    Calls,
    leftovers,
    live_instances,
    node_index,
    runtime,
    write_spec,
)


def _ids_by_index(name: str) -> dict[int, str]:
    return {node_index(i): i["InstanceId"] for i in live_instances(name)}


def _running(tmp_path: Path) -> tuple[Path, str, dict[int, str]]:
    """A 2-node cluster made by a plain `up`: its spec, name and instances by index."""
    spec = write_spec(tmp_path, count=2)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    name = load(str(spec)).name
    nodes = _ids_by_index(name)
    assert sorted(nodes) == [0, 1]
    return spec, name, nodes


def _down(spec: Path, name: str) -> None:
    do_down(str(spec), yes=True, rt=runtime())
    assert leftovers(name) == {}


def test_a_saved_plan_of_a_no_op_saves_through_the_cli_and_changes_nothing(
        calls: Calls, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    spec, name, before = _running(tmp_path)
    out = tmp_path / "plan.json"
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # the emulator's endpoint, no sandbox state
    made = CliRunner().invoke(cli, ["plan", str(spec), "--out", str(out)])
    assert made.exit_code == 0, made.output
    # the renderer wraps lines at the terminal's width (a long tmp path): compare words
    assert f"saved the plan to {out}".replace(" ", "") in "".join(made.output.split())
    saved = json.loads(out.read_text())
    assert [n["instance_id"] for n in saved["observed"]["nodes"]] != []
    assert saved["observed"]["nodes"][0]["tags"]["clusterkit:cluster"] == name
    calls.reset()
    result = do_up(None, plan_file=str(out), rt=runtime(calls), wait_ssh=False)
    assert calls.mutating() == {}
    assert {n.index: n.instance_id for n in result.nodes} == before == _ids_by_index(name)
    _down(spec, name)


def test_a_saved_plan_of_a_scale_out_launches_the_missing_node(calls: Calls,
                                                              tmp_path: Path):
    spec, name, before = _running(tmp_path)
    grown = write_spec(tmp_path, name=name, count=3)
    out = str(tmp_path / "plan.json")
    planned = do_plan(str(grown), rt=runtime(), out=out)
    assert planned.nodes.launch == (2,)
    calls.reset()
    do_up(None, plan_file=out, rt=runtime(calls), wait_ssh=False)
    after = _ids_by_index(name)
    assert sorted(after) == [0, 1, 2] and {i: after[i] for i in (0, 1)} == before
    assert calls.mutating()["TerminateInstances"] == 0
    _down(grown, name)


def test_a_saved_plan_of_a_replacement_launches_the_lost_node_only(calls: Calls,
                                                                  tmp_path: Path):
    spec, name, before = _running(tmp_path)
    ec2 = boto3.client("ec2", REGION)
    ec2.terminate_instances(InstanceIds=[before[1]])  # worker 1 lost (a spot reclaim)
    ec2.get_waiter("instance_terminated").wait(InstanceIds=[before[1]],
                                               WaiterConfig={"Delay": 1})
    out = str(tmp_path / "plan.json")
    planned = do_plan(str(spec), rt=runtime(), out=out)
    assert planned.nodes.launch == (1,) and planned.nodes.terminate == ()
    do_up(None, plan_file=out, rt=runtime(calls), wait_ssh=False)
    after = _ids_by_index(name)
    assert after[0] == before[0] and after[1] != before[1] and sorted(after) == [0, 1]
    _down(spec, name)


def test_a_saved_plan_applies_from_another_directory(calls: Calls, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch):
    first = tmp_path / "checkout"
    first.mkdir()
    spec = write_spec(first, count=1)
    name = load(str(spec)).name
    monkeypatch.chdir(first)
    do_plan(spec.name, rt=runtime(), out="plan.json")  # relative paths, as typed
    copy = tmp_path / "another-checkout"  # spec and plan moved together
    shutil.copytree(first, copy)
    shutil.rmtree(first)
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    do_up(None, plan_file=str(copy / "plan.json"), rt=runtime(), wait_ssh=False)
    assert len(live_instances(name)) == 1
    moved = tmp_path / "plans"  # now the plan alone moves: its spec stays where it was
    moved.mkdir()
    spec = copy / spec.name
    do_plan(str(spec), rt=runtime(), out=str(copy / "again.json"))
    shutil.move(copy / "again.json", moved / "again.json")
    calls.reset()
    do_up(None, plan_file=str(moved / "again.json"), rt=runtime(calls), wait_ssh=False)
    assert calls.mutating() == {} and len(live_instances(name)) == 1
    _down(spec, name)


def test_a_spec_changed_only_in_comments_keeps_its_saved_plan(calls: Calls, tmp_path: Path):
    spec = write_spec(tmp_path, count=1)
    name = load(str(spec)).name
    out = str(tmp_path / "plan.json")
    do_plan(str(spec), rt=runtime(), out=out)
    text = spec.read_text().replace("count: 1", "count: 1   # one node is enough")
    spec.write_text("# the cluster of the sandbox walk\n\n" + text)
    do_up(None, plan_file=out, rt=runtime(calls), wait_ssh=False)
    assert len(live_instances(name)) == 1
    _down(spec, name)
