"""`up` asks before spending and applies a changed spec truthfully, against moto in server
mode (real HTTP): what it shows, `--yes`, no terminal = refuse, decline = exit 1 and
nothing changed, a second `up` does not ask; a larger count launches the missing nodes
in the cluster's AZ, a smaller one removes the highest workers after confirmation, and
a change it cannot apply in place is refused with the diff. SSH waiting is off (moto's
nodes have no sshd). The question is answered by a function standing in for the user at
a terminal (CliRunner's stdin is never a terminal)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterkitError, UsageError
from tests.integration.conftest import (
    REGION,
    Calls,
    is_mutating,
    leftovers,
    live_instances,
    node_index,
    runtime,
    write_spec,
)


class Answers:
    """The user at the terminal: answers every question with ``answer``, keeps them."""

    def __init__(self, answer: bool) -> None:
        self.answer, self.asked = answer, []

    def __call__(self, question: str) -> bool:
        self.asked.append(question)
        return self.answer


def test_no_terminal_and_no_yes_refuses_before_any_mutating_call(calls: Calls, tmp_path,
                                                                   capsys):
    spec = str(write_spec(tmp_path, name="notty", count=2))
    with pytest.raises(UsageError) as err:
        do_up(spec, rt=runtime(calls), wait_ssh=False)  # confirm=None: no terminal
    assert err.value.exit_code == 2 and "--yes" in (err.value.hint or "")
    assert calls.log and calls.mutating() == {}
    assert leftovers("notty") == {}
    shown = capsys.readouterr().err
    assert "launch 2 node(s)" in shown and "c5.large, on-demand" in shown
    assert "root volumes: 2 x 8 GB gp3" in shown and "new spending: $" in shown


def test_cli_without_a_terminal_exits_2_with_the_hint_and_calls_nothing_mutating(
        moto_env, tmp_path, monkeypatch):
    """Through the CLI: CliRunner's stdin is not a terminal. Every AWS operation is
    recorded at botocore's one entry point (real calls to moto go on)."""
    import botocore.client

    seen: list[str] = []
    real = botocore.client.BaseClient._make_api_call

    def record(self, operation_name, api_params):
        seen.append(operation_name)
        return real(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # moto directly, no sandbox daemon
    spec = str(write_spec(tmp_path, name="clitty", count=1))
    result = CliRunner().invoke(cli, ["up", spec])
    assert result.exit_code == 2, result.output
    assert "--yes" in result.output and "Traceback" not in result.output
    assert seen and not [op for op in seen if is_mutating(op)]
    assert leftovers("clitty") == {}


def test_decline_exits_1_and_changes_nothing(calls: Calls, tmp_path):
    spec = str(write_spec(tmp_path, name="nope", count=1))
    user = Answers(False)
    with pytest.raises(ClusterkitError) as err:
        do_up(spec, rt=runtime(calls), wait_ssh=False, confirm=user)
    assert err.value.exit_code == 1 and "nothing changed" in err.value.message
    assert len(user.asked) == 1
    assert calls.mutating() == {} and leftovers("nope") == {}


def test_yes_launches_and_a_second_up_with_nothing_to_change_does_not_ask(calls, tmp_path):
    spec = str(write_spec(tmp_path, name="ask2", count=2))
    first = Answers(True)
    do_up(spec, rt=runtime(calls), wait_ssh=False, confirm=first)
    assert len(first.asked) == 1 and len(live_instances("ask2")) == 2
    calls.reset()
    second = Answers(False)  # would refuse, if it were asked
    do_up(spec, rt=runtime(calls), wait_ssh=False, confirm=second)
    assert second.asked == [] and calls.mutating() == {}
    do_down(spec, yes=True, rt=runtime())
    assert leftovers("ask2") == {}


def test_larger_count_launches_the_missing_nodes_in_the_same_az(calls, tmp_path, capsys):
    do_up(str(write_spec(tmp_path, name="grow", count=2)), yes=True, rt=runtime(),
          wait_ssh=False)
    azs = {i["Placement"]["AvailabilityZone"] for i in live_instances("grow")}
    capsys.readouterr()
    user = Answers(True)
    do_up(str(write_spec(tmp_path, name="grow", count=4)), rt=runtime(calls),
          wait_ssh=False, confirm=user)
    err = capsys.readouterr().err
    assert "differs: nodes.count: running 2, spec says 4" in err
    assert "launch 2 node(s) (indexes 2, 3)" in err and len(user.asked) == 1
    assert calls.mutating()["RunInstances"] == 1
    nodes = live_instances("grow")
    assert sorted(node_index(i) for i in nodes) == [0, 1, 2, 3]
    assert {i["Placement"]["AvailabilityZone"] for i in nodes} == azs
    do_down("grow", yes=True, region=REGION, rt=runtime())


def test_smaller_count_removes_the_highest_workers_only_after_confirmation(calls, tmp_path,
                                                                           capsys):
    do_up(str(write_spec(tmp_path, name="shrink", count=3)), yes=True, rt=runtime(),
          wait_ssh=False)
    by_index = {node_index(i): i["InstanceId"] for i in live_instances("shrink")}
    smaller = str(write_spec(tmp_path, name="shrink", count=1))
    with pytest.raises(ClusterkitError):
        do_up(smaller, rt=runtime(calls), wait_ssh=False, confirm=Answers(False))
    assert calls.mutating() == {} and len(live_instances("shrink")) == 3
    err = capsys.readouterr().err
    assert f"shrink-worker-2 ({by_index[2]})" in err and f"shrink-worker-1 ({by_index[1]})" in err
    do_up(smaller, rt=runtime(calls), wait_ssh=False, confirm=Answers(True))
    assert [i["InstanceId"] for i in live_instances("shrink")] == [by_index[0]]
    do_down("shrink", yes=True, region=REGION, rt=runtime())


@pytest.mark.parametrize(("old", "new", "key"), [
    ("[c5.large]", "[m5.large]", "nodes.instance_types"),
    ("market: on-demand", "market: spot", "nodes.market"),
    ("ami-12c6146b", "ami-1e749f67", "nodes.image.id"),
])
def test_a_change_that_cannot_apply_in_place_is_refused_with_the_diff(calls, tmp_path, old,
                                                                      new, key):
    name = f"chg-{key.split('.')[-1].replace('_', '')}"
    spec = write_spec(tmp_path, name=name, count=1)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    spec.write_text(spec.read_text().replace(old, new))
    with pytest.raises(UsageError) as err:
        do_up(str(spec), yes=True, rt=runtime(calls), wait_ssh=False)
    assert err.value.exit_code == 2
    assert f"{key}: running" in err.value.message
    assert f"clusterkit down {name}" in (err.value.hint or "")
    assert calls.mutating() == {} and len(live_instances(name)) == 1
    do_down(name, yes=True, region=REGION, rt=runtime())
    assert leftovers(name) == {}
