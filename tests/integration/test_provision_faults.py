"""Fault tolerance of `up`: fail it at each of its mutating AWS calls in turn (server
error, throttling that outlasted the retries, no capacity, Ctrl-C). Each (call, fault)
pair has one expected outcome (EXPECTED: the error class `up` stops with, or that it
recovers) and no mutating call follows a fault that stops it; after each, `down` must
leave zero resources of the cluster in the emulator, and (after a Ctrl-C, which leaves
the most half-made state) a fresh `up` must work.
Every failed `up` must say what still runs: each instance, its $/h, and the exact
`clusterkit down NAME --region R` that removes it.

The failure is injected by a botocore ``before-call`` hook on clusterkit's session
(tests/integration/conftest.py: Calls): a test double for the failure only; every
other call is real HTTP to moto in server mode. SSH waiting is off (moto's instances
have no sshd; tests/e2e covers SSH against the sandbox)."""

from __future__ import annotations

import pytest

from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import AwsError, CapacityError, ClusterkitError
from tests import support
from tests.integration.conftest import (
    REGION,
    Calls,
    is_mutating,
    leftovers,
    runtime,
    write_spec,
)

EFS = "storage:\n  efs: {mount: /efs, deletion_policy: delete}\n"
# The mutating calls of a clean `up` of 2 nodes with EFS, in order (CreateTags: one per
# role, master then workers; the same for any node count above one).
CLEAN_UP = ["ImportKeyPair", "CreateStack", "CreateMountTarget", "RunInstances",
            "CreateInstanceProfile", "CreateInstanceProfile", "CreateTags", "CreateTags",
            "AddRoleToInstanceProfile", "AddRoleToInstanceProfile",
            "AssociateIamInstanceProfile", "AssociateIamInstanceProfile"]
# the mount target just before the launch: it readies as the nodes boot; the instance
# profiles (the nodes', the controller's) made through IAM's API once the launch is away,
# given the stack's roles once it is complete, and the nodes' (for EFS) associated then:
# the launch waits for none of them
AT_ONCE = {"AssociateIamInstanceProfile",  # one call per node, made in parallel
           "CreateInstanceProfile", "AddRoleToInstanceProfile"}  # one per profile
FAULTS = ["InternalError", "RequestLimitExceeded", "InsufficientInstanceCapacity", "SIGINT"]
RECOVERS = "recovers"
# What `up` does when call k meets each fault (columns in FAULTS order). A server error
# or throttling that outlasted botocore's retries stops `up` (AwsError, exit 1); Ctrl-C
# stops it (KeyboardInterrupt: the CLI exits 130). No capacity before the nodes exist
# moves on to the next launch candidate, whose walk repeats that call and succeeds; once
# the nodes run there is no other candidate, and `up` stops with CapacityError (exit 1).
# None: not injected there. IAM answers neither EC2's throttling code nor its capacity
# error, and the calls of one group (AT_ONCE) are all made before the first error is
# raised, so a new group's first call stands for the group.
EXPECTED = [
    ("ImportKeyPair", (AwsError, AwsError, RECOVERS, KeyboardInterrupt)),
    ("CreateStack", (AwsError, AwsError, RECOVERS, KeyboardInterrupt)),
    ("CreateMountTarget", (AwsError, AwsError, RECOVERS, KeyboardInterrupt)),
    ("RunInstances", (AwsError, AwsError, RECOVERS, KeyboardInterrupt)),
    ("CreateInstanceProfile", (AwsError, None, None, KeyboardInterrupt)),
    ("CreateInstanceProfile", (None, None, None, None)),
    ("CreateTags", (AwsError, AwsError, CapacityError, KeyboardInterrupt)),
    ("CreateTags", (AwsError, AwsError, CapacityError, KeyboardInterrupt)),
    ("AddRoleToInstanceProfile", (AwsError, None, None, KeyboardInterrupt)),
    ("AddRoleToInstanceProfile", (None, None, None, None)),
    ("AssociateIamInstanceProfile", (AwsError, AwsError, CapacityError, KeyboardInterrupt)),
    ("AssociateIamInstanceProfile", (AwsError, AwsError, CapacityError, KeyboardInterrupt)),
]
# A launch that found no capacity moves to the next candidate, another AZ of the region,
# which gets its own mount target first.
RESUMES_AT = {"RunInstances": "CreateMountTarget"}
CASES = [(k, fault, row[1][j]) for k, row in enumerate(EXPECTED, start=1)
         for j, fault in enumerate(FAULTS) if row[1][j] is not None]


def _spec(tmp_path) -> tuple[str, str]:
    name = support.unique_name("flt")
    return name, str(write_spec(tmp_path, name=name, count=2, extra=EFS))


def _mutating(calls: Calls) -> list[str]:
    return [op for _, op in calls.log if is_mutating(op)]


def test_expected_table_follows_the_clean_up():
    assert [call for call, _ in EXPECTED] == CLEAN_UP
    assert all(len(outcomes) == len(FAULTS) for _, outcomes in EXPECTED)


def test_clean_up_makes_exactly_these_mutating_calls(calls: Calls, tmp_path):
    name, spec = _spec(tmp_path)
    do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    assert _mutating(calls) == CLEAN_UP
    left = leftovers(name)
    # every resource type the stack makes is really there, so the checks below count
    for kind in ("instances", "volumes", "security_groups", "launch_templates", "key_pairs",
                 "stacks", "file_systems", "mount_targets", "iam_roles", "instance_profiles"):
        assert left.get(kind), kind
    do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}


def _failed_up(spec: str, calls: Calls, capsys) -> tuple[BaseException | None, str]:
    """Run `up`: the exception it stopped with (None when it succeeded) and what it
    told the user about it (the error's message and hint, or what it printed on Ctrl-C)."""
    capsys.readouterr()
    try:
        do_up(spec, yes=True, rt=runtime(calls), wait_ssh=False)
    except ClusterkitError as exc:
        return exc, f"{exc.message}\nhint: {exc.hint}"
    except KeyboardInterrupt as exc:
        return exc, capsys.readouterr().err
    return None, ""


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


def _group_end(k: int) -> int:
    """Where the calls made at once with call k end: one per node, all made before the
    first error is raised (AT_ONCE); any other call is its own group."""
    end = k
    while CLEAN_UP[k - 1] in AT_ONCE and end < len(CLEAN_UP) and \
            CLEAN_UP[end] == CLEAN_UP[k - 1]:
        end += 1
    return end


def assert_outcome(k: int, fault: str, expected: object, caught: BaseException | None,
                   calls: Calls) -> None:
    """``up`` ended as EXPECTED says, and made no mutating call after a fatal fault."""
    if expected == RECOVERS:
        assert caught is None, caught
        # the fault fired once; the next candidate's walk made that call again (from its
        # own mount target, when the next candidate is another AZ)
        again = CLEAN_UP.index(RESUMES_AT.get(CLEAN_UP[k - 1], CLEAN_UP[k - 1]))
        assert _mutating(calls) == CLEAN_UP[:k] + CLEAN_UP[again:]
        return
    assert type(caught) is expected, (expected, caught)
    assert _mutating(calls) == CLEAN_UP[:_group_end(k)]
    if isinstance(caught, AwsError):
        assert caught.code == fault and caught.exit_code == 1, caught


@pytest.mark.parametrize(("k", "fault", "expected"), CASES,
                         ids=[f"{k}-{CLEAN_UP[k - 1]}-{f}" for k, f, _ in CASES])
def test_up_fails_at_call_k_then_down_leaves_nothing(calls: Calls, tmp_path, k, fault,
                                                     expected, capsys):
    name, spec = _spec(tmp_path)
    calls.fail_at, calls.fault = k, fault
    caught, said = _failed_up(spec, calls, capsys)
    assert calls.mutating_seen >= k  # the fault really fired
    assert_outcome(k, fault, expected, caught, calls)
    if caught is not None:
        assert_tells_what_runs(said, name)
    if isinstance(caught, KeyboardInterrupt):
        assert "up interrupted" in said, said
    else:
        launched = k > CLEAN_UP.index("RunInstances") + 1  # the fault came after it
        assert len(leftovers(name).get("instances", [])) == (2 if caught is None or launched
                                                             else 0)
    do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}, f"after {fault} at call {k} ({CLEAN_UP[k - 1]})"
    if fault == "SIGINT":  # a Ctrl-C leaves the most half-made state; the other faults'
        assert_fresh_up_works(spec, name)  # leftovers ({} above) show down as whole


def assert_fresh_up_works(spec: str, name: str) -> None:
    """After `down`, nothing of the failed `up` stands in a fresh one's way."""
    fresh = Calls()
    do_up(spec, yes=True, rt=runtime(fresh), wait_ssh=False)
    assert fresh.mutating()["RunInstances"] == 1
    assert len(leftovers(name)["instances"]) == 2
    do_down(spec, yes=True, rt=runtime())
    assert leftovers(name) == {}


def test_up_resumes_after_each_fault_without_down(calls: Calls, tmp_path, capsys):
    """An interrupted `up` is finished by the next `up`: no duplicate nodes."""
    name, spec = _spec(tmp_path)
    for k in (k for k, fault, _ in CASES if fault == "SIGINT"):
        calls.reset()
        calls.fail_at, calls.fault = k, "SIGINT"
        caught, said = _failed_up(spec, calls, capsys)
        assert isinstance(caught, KeyboardInterrupt) and "up interrupted" in said, k
        assert_tells_what_runs(said, name)
        do_up(spec, yes=True, rt=runtime(), wait_ssh=False)
        assert len(leftovers(name)["instances"]) == 2, k
        do_down(spec, yes=True, rt=runtime())
