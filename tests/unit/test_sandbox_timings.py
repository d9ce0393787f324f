"""sandbox.timings: the one table of AWS's waits, scaled; `--timings` parsed with a
clear error; every figure carries its source."""

from __future__ import annotations

import pytest

from clusterkit_sandbox.timings import (
    DEFAULT_SCALE,
    ROUND_TRIPS,
    WAITS,
    Timings,
    Wait,
    family,
    parse,
)


def test_parse_profiles_and_scales():
    assert parse(None) == Timings() and not parse("none").on and not parse("").on
    assert parse("aws").scale == DEFAULT_SCALE
    assert parse("aws:1").scale == 1.0 and parse("aws:0.02").scale == 0.02
    for bad, words in (("gcp", "the profile is `aws`"), ("aws:x", "must be a number"),
                       ("aws:0", "above 0"), ("aws:11", "at most 10"), ("aws:-1", "above 0")):
        with pytest.raises(ValueError, match=words):
            parse(bad)


def test_scaled_figures_come_from_the_one_table():
    timed = Timings(0.5)
    assert timed.round_trip("RunInstances") == 0.5 * ROUND_TRIPS["run_instances"].seconds
    assert timed.round_trip("DescribeInstances") == 0.5 * ROUND_TRIPS["describe"].seconds
    assert timed.round_trip("CreateTags") == 0.5 * ROUND_TRIPS["mutate"].seconds
    assert timed.wait(Wait.INSTANCE_RUNNING) == 0.5 * WAITS[Wait.INSTANCE_RUNNING].seconds
    untimed = Timings()
    assert untimed.round_trip("RunInstances") == 0 and untimed.wait(Wait.SSH_ANSWERS) == 0


def test_families_and_sources():
    assert [family(op) for op in ("RunInstances", "DescribeStacks", "ListRoles", "GetRole",
                                  "CreateStack", "TerminateInstances")] == [
        "run_instances", "describe", "describe", "describe", "mutate", "mutate"]
    assert all(len(f.source) > 20 for f in (*ROUND_TRIPS.values(), *WAITS.values()))
    assert set(WAITS) == set(Wait)


def test_status_json_round_trips_the_scale():
    table = Timings(0.2).to_json()
    assert table["profile"] == "aws" and table["scale"] == 0.2
    assert table["waits"][Wait.SSH_ANSWERS.value]["sandbox_s"] == round(
        WAITS[Wait.SSH_ANSWERS].seconds * 0.2, 4)
    assert Timings.from_json(table) == Timings(0.2)
    assert Timings().to_json()["profile"] == "none"


def test_a_table_with_a_figure_of_its_own_reaches_the_daemon_whole():
    """What do_start writes is what the daemon reads: a changed figure included, and a
    row it does not know (or a broken one) leaves the table's own figure."""
    from types import MappingProxyType

    from clusterkit_sandbox.timings import ROUND_TRIPS, Figure
    mine = Timings(0.5, waits=MappingProxyType(
        {**WAITS, Wait.VOLUME_FROM_SNAPSHOT: Figure(99.0, "a test's own")}))
    back = Timings.from_json(mine.to_json())
    assert back == mine and back.wait(Wait.VOLUME_FROM_SNAPSHOT) == 49.5
    table = Timings(0.5).to_json()
    table["waits"]["no such wait"] = {"aws_s": 1.0}
    table["waits"][Wait.SSH_ANSWERS.value] = {"aws_s": "soon"}
    table["round_trips"] = "garbage"
    back = Timings.from_json(table)
    assert back == Timings(0.5) and dict(back.round_trips) == dict(ROUND_TRIPS)


def test_each_stack_resource_type_has_its_figure_and_others_a_default():
    from clusterkit_sandbox.timings import STACK_RESOURCES, stack_wait

    timed = Timings(0.5)
    for kind, wait in STACK_RESOURCES.items():
        assert stack_wait(kind) is wait
        assert timed.stack_create(kind) == 0.5 * WAITS[wait].seconds
    assert stack_wait("AWS::SQS::Queue") is Wait.STACK_OTHER
    assert timed.stack_delete() == 0.5 * WAITS[Wait.STACK_DELETE].seconds
    assert Timings().stack_create("AWS::IAM::InstanceProfile") == 0.0
    # the figures the issue names: instance profile ~120 s after its role's ~12 s, EFS ~12 s
    assert WAITS[Wait.STACK_INSTANCE_PROFILE].seconds == 120.0
    assert WAITS[Wait.STACK_IAM_ROLE].seconds == WAITS[Wait.STACK_EFS].seconds == 12.0


def test_storage_figures_and_their_stated_defaults():
    assert WAITS[Wait.VOLUME_ATTACH].seconds == 7.0
    assert WAITS[Wait.SNAPSHOT_COMPLETE].seconds >= 180.0
    assert WAITS[Wait.EFS_MOUNT_TARGET].seconds >= 60.0
    # where nothing is published the source says so, never a made-up citation alone
    for wait in (Wait.VOLUME_FROM_SNAPSHOT, Wait.STACK_INGRESS, Wait.STACK_LAUNCH_TEMPLATE,
                 Wait.STACK_PLACEMENT_GROUP, Wait.STACK_OTHER, Wait.STACK_DELETE):
        assert "no " in WAITS[wait].source and "default" in WAITS[wait].source, wait
    table = Timings(0.1).to_json()
    assert set(table["waits"]) == {w.value for w in Wait}


def test_docs_table_has_every_figure_scaled_with_its_source():
    from tests import support

    table = support.load_script("docs").sandbox_timings()
    rows = table.splitlines()[2:]
    assert len(rows) == len(ROUND_TRIPS) + len(WAITS)
    for wait, figure in WAITS.items():
        row = next(r for r in rows if r.startswith(f"| {wait.value} |"))
        assert f"| {figure.seconds:g} s | {round(figure.seconds * DEFAULT_SCALE, 4):g} s |" \
            in row and figure.source in row
