"""tests/support.py: an unmet requirement skips a test on a developer machine and fails
it under CI (CI=true), so CI can never pass by skipping what it should run."""

from __future__ import annotations

import pytest

from tests import support

MISSING = "clusterkit_no_such_module"


def test_unmet_requirement_skips_outside_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match=MISSING):
        support.require_module(MISSING)


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_unmet_requirement_fails_under_ci(monkeypatch, value):
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match=f"CI=true but .*{MISSING}"):
        support.require_module(MISSING)


def test_met_requirement_does_nothing(monkeypatch):
    monkeypatch.setenv("CI", "true")
    support.require_module("pytest")


def test_unique_names_differ():
    names = {support.unique_name("c") for _ in range(50)}
    assert len(names) == 50 and all(n.startswith("c-") for n in names)


def test_wait_for_returns_the_value_or_names_what_it_waited_for():
    answers = iter([None, 0, "ready"])
    assert support.wait_for(lambda: next(answers), "a value", interval=0) == "ready"
    with pytest.raises(TimeoutError, match="never: still not so"):
        support.wait_for(lambda: False, "never", timeout=0, interval=0)
