"""sandbox.timings: the one table of AWS's waits, scaled; `--timings` parsed with a
clear error; every figure carries its source."""

from __future__ import annotations

import pytest

from clusterkit.sandbox.timings import (
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
