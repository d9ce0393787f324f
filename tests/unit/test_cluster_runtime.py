"""cluster/runtime.py: the AWS session is made at its first use, so a command that ends
up calling no AWS API (`train` on the nodes `up` last saw) never imports boto3."""

from __future__ import annotations

import subprocess
import sys

import pytest

from clusterkit.cluster.runtime import at_once


def test_runtime_and_the_train_path_load_no_boto3_until_a_call():
    probe = ("import sys, clusterkit.cluster.jobs.train as t; "
             "from clusterkit.cluster.runtime import Runtime; "
             "rt = Runtime.make(region='eu-west-1'); loaded = 'boto3' in sys.modules; "
             "print(loaded, rt.session.region_name, 'boto3' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["False", "eu-west-1", "True"]


def test_a_bad_profile_fails_at_the_first_use_as_a_credentials_error():
    probe = ("from clusterkit.cluster.runtime import Runtime\n"
             "from clusterkit.errors import ClusterkitError\n"
             "rt = Runtime.make(profile='no-such-profile-ck')\n"
             "try:\n    rt.session.client\nexcept ClusterkitError as e:\n"
             "    print(type(e).__name__, e.exit_code)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent",
                                          "AWS_CONFIG_FILE": "/nonexistent"}).stdout
    assert out.split()[0] == "CredentialsError"


def test_wait_until_polls_until_done_and_raises_what_late_makes_past_the_deadline():
    from clusterkit.cluster.runtime import Runtime

    now, slept = [0.0], []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    rt = Runtime(session=None, poll=2.0, sleep=sleep, clock=lambda: now[0])
    answers = iter([(False, "pending"), (False, "pending"), (True, "ready")])
    assert rt.wait_until(lambda: next(answers), deadline=100, late=RuntimeError) == "ready"
    assert slept == [2.0, 2.0]
    slept.clear()
    with pytest.raises(RuntimeError, match="still creating"):
        rt.wait_until(lambda: (False, "still creating"), deadline=now[0] + 5,
                      late=RuntimeError)
    assert slept == [2.0, 2.0, 2.0]  # 6 s past a 5 s deadline: raised, not slept again
    slept.clear()
    steps = iter([(False, 1), (False, 2), (False, 3), (True, 4)])
    rt.wait_until(lambda: next(steps), deadline=now[0] + 100, late=RuntimeError, first=0.5)
    assert slept == [0.5, 1.0, 2.0]  # from `first`, doubling up to the poll


def test_at_once_finishes_every_call_then_raises_the_first_error() -> None:
    seen: list[int] = []

    def work(n: int) -> int:
        seen.append(n)
        if n in (2, 4):
            raise ValueError(f"failed {n}")
        return n * 10

    assert at_once([1, 3], work) == [10, 30]
    with pytest.raises(ValueError, match="failed 2"):
        at_once([1, 2, 3, 4, 5], work)
    assert sorted(seen) == [1, 1, 2, 3, 3, 4, 5]
    assert at_once([], work) == []
