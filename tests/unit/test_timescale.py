"""clusterkit.timescale: a timed sandbox's scale, honoured in sandbox mode only, and the
runtime's poll that keeps pace with it."""

from __future__ import annotations

import pytest

from clusterkit.cluster.runtime import POLL, Runtime
from clusterkit.timescale import TIME_SCALE_ENV, time_scale


@pytest.mark.parametrize(("env", "scale"), [
    ({}, 1.0),
    ({TIME_SCALE_ENV: "0.1"}, 1.0),  # not in sandbox mode: AWS's pace, whatever it says
    ({"CLUSTERKIT_SANDBOX": "1"}, 1.0),
    ({"CLUSTERKIT_SANDBOX": "1", TIME_SCALE_ENV: "0.1"}, 0.1),
    ({"CLUSTERKIT_SANDBOX": "1", TIME_SCALE_ENV: "1"}, 1.0),
    ({"CLUSTERKIT_SANDBOX": "1", TIME_SCALE_ENV: "0"}, 1.0),
    ({"CLUSTERKIT_SANDBOX": "1", TIME_SCALE_ENV: "-2"}, 1.0),
    ({"CLUSTERKIT_SANDBOX": "1", TIME_SCALE_ENV: "3"}, 1.0),  # never slower than AWS
    ({"CLUSTERKIT_SANDBOX": "1", TIME_SCALE_ENV: "fast"}, 1.0),
])
def test_time_scale(env: dict[str, str], scale: float) -> None:
    assert time_scale(env) == scale


def test_the_runtime_polls_at_the_sandbox_pace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    assert Runtime.make(region="us-east-1").poll == POLL
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    monkeypatch.setenv(TIME_SCALE_ENV, "0.1")
    assert Runtime.make(region="us-east-1").poll == pytest.approx(POLL * 0.1)
