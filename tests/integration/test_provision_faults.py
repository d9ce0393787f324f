"""Fault tolerance of `up`: fail it at each of its mutating AWS calls in turn (server
error, throttling that outlasted the retries, no capacity, Ctrl-C); after each, `down`
must leave zero resources of the cluster in the emulator, and a fresh `up` must work.
Every failed `up` must say what still runs: each instance, its $/h, and the exact
`clusterkit down NAME --region R` that removes it.

The failure is injected by a botocore ``before-call`` hook on clusterkit's session
(tests/integration/conftest.py: Calls): a test double for the failure only; every
other call is real HTTP to moto in server mode. SSH waiting is off (moto's instances
have no sshd; tests/e2e covers SSH against the sandbox)."""

from __future__ import annotations

import pytest

from clusterkit.cluster.down import do_down
from clusterkit.cluster.up import do_up
from clusterkit.errors import ClusterkitError
from tests.integration.conftest import (
    REGION,
    Calls,
    is_mutating,
    leftovers,
    runtime,
    write_spec,
)

EFS = "storage:\n  efs: {mount: /efs, deletion_policy: delete}\n"
# The mutating calls of a clean `up` of 2 nodes with EFS, in order.
CLEAN_UP = ["ImportKeyPair", "CreateStack", "RunInstances", "CreateTags", "CreateTags",
            "CreateMountTarget"]
FAULTS = ["InternalError", "RequestLimitExceeded", "InsufficientInstanceCapacity", "SIGINT"]


def _spec(tmp_path):
    return write_spec(tmp_path, name="flt", count=2, extra=EFS)


def test_clean_up_makes_exactly_these_mutating_calls(calls: Calls, tmp_path):
    do_up(str(_spec(tmp_path)), yes=True, rt=runtime(calls), wait_ssh=False)
    assert [op for _, op in calls.log if is_mutating(op)] == CLEAN_UP
    left = leftovers("flt")
    # every resource type the stack makes is really there, so the checks below count
    for kind in ("instances", "volumes", "security_groups", "launch_templates", "key_pairs",
                 "stacks", "file_systems", "mount_targets", "iam_roles", "instance_profiles"):
        assert left.get(kind), kind
    do_down(str(_spec(tmp_path)), yes=True, rt=runtime())
    assert leftovers("flt") == {}


def _failed_up(spec: str, calls: Calls, capsys) -> str | None:
    """Run `up`; what it told the user when it failed (the error's message and hint,
    or what it printed on Ctrl-C), None when it succeeded."""
    capsys.readouterr()
    try:
        do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    except ClusterkitError as exc:
        return f"{exc.message}\nhint: {exc.hint}"
    except KeyboardInterrupt:
        return capsys.readouterr().err
    return None


def assert_tells_what_runs(said: str, cluster: str) -> None:
    """A failed `up` names every instance still running, their $/h and the exact
    command that removes them."""
    running = leftovers(cluster).get("instances", [])
    assert f"clusterkit down {cluster} --region {REGION}" in said, said
    for iid in running:
        assert iid in said, (iid, said)
    if running:
        assert f"still running: {len(running)} instance(s)" in said and "/h" in said, said
    else:
        assert "still running" not in said and "is running" in said, said


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("k", range(1, len(CLEAN_UP) + 1),
                         ids=[f"{i}-{op}" for i, op in enumerate(CLEAN_UP, start=1)])
def test_up_fails_at_call_k_then_down_leaves_nothing(calls: Calls, tmp_path, k, fault,
                                                     capsys):
    spec = str(_spec(tmp_path))
    calls.fail_at, calls.fault = k, fault
    # a capacity error at CreateStack moves on to the next candidate, which may succeed
    said = _failed_up(spec, calls, capsys)
    assert calls.mutating_seen >= k  # the fault really fired
    if said is not None:
        assert_tells_what_runs(said, "flt")
    do_down(spec, yes=True, rt=runtime())
    assert leftovers("flt") == {}, f"after {fault} at call {k} ({CLEAN_UP[k - 1]})"
    fresh = Calls()
    do_up(spec, yes=True, rt=runtime(fresh), wait_ssh=False)
    assert fresh.mutating()["RunInstances"] == 1
    assert len(leftovers("flt")["instances"]) == 2
    do_down(spec, yes=True, rt=runtime())
    assert leftovers("flt") == {}


def test_up_resumes_after_each_fault_without_down(calls: Calls, tmp_path, capsys):
    """An interrupted `up` is finished by the next `up`: no duplicate nodes."""
    spec = str(_spec(tmp_path))
    for k in range(1, len(CLEAN_UP) + 1):
        calls.reset()
        calls.fail_at, calls.fault = k, "SIGINT"
        said = _failed_up(spec, calls, capsys)
        assert said is not None and "up interrupted" in said, k
        assert_tells_what_runs(said, "flt")
        do_up(spec, yes=True, rt=runtime(), wait_ssh=False)
        assert len(leftovers("flt")["instances"]) == 2, k
        do_down(spec, yes=True, rt=runtime())
