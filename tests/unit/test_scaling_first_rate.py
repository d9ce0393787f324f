"""`scaling`'s wait for every node's first throughput line (cluster/jobs/scaling.py):
a job that ends without one, or stays silent past --rate-wait, fails at once with an
error naming train.throughput_pattern; what it waits for is said, not kept silent.
The nodes are stand-ins (a Top whose reads return prepared samples), the clock fake."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from clusterkit.cluster.jobs.scaling import steady_rate
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Collect
from clusterkit.node.jobstate import JobStateName


@dataclass
class FakeJobCluster:
    count: int
    name: str = "c1"

    @property
    def targets(self) -> list[Any]:
        return [SimpleNamespace(node=SimpleNamespace(index=i)) for i in range(self.count)]

    def node_name(self, index: int) -> str:
        return "master" if index == 0 else f"worker-{index}"


@dataclass
class FakeTop:
    """Each read adds the next prepared samples (node index -> samples) to the windows."""

    jc: FakeJobCluster
    reads: list[dict[int, list[dict[str, Any]]]]
    job_id: str = "j-20250101-000000-abcd"
    windows: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    count: int = 0

    def read(self) -> None:
        found = self.reads[min(self.count, len(self.reads) - 1)]
        self.count += 1
        for index, samples in found.items():
            self.windows.setdefault(index, []).extend(samples)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def runtime(clock: Clock, events: Collect) -> Runtime:
    return Runtime(session=None, report=events, poll=2.0, sleep=clock.sleep,
                   clock=lambda: clock.now)


def no_rate(t: float) -> dict[str, Any]:
    return {"t": t, "samples_per_s": None, "job_cpu": 0.1}


def test_a_job_that_ends_without_a_throughput_line_fails_at_once():
    """The job succeeded after 4 s having printed no rate: the error comes at the next
    poll (not after --rate-wait), names the silent node and train.throughput_pattern."""
    clock, events = Clock(), Collect()
    top = FakeTop(FakeJobCluster(2), [{0: [no_rate(1.0)], 1: [no_rate(1.0)]}])
    ended = lambda: JobStateName.SUCCEEDED if clock.now >= 4 else None  # noqa: E731
    with pytest.raises(ClusterkitError) as caught:
        steady_rate(runtime(clock, events), top, 10.0, wait=300.0, ended=ended)
    assert clock.now == 4.0  # two polls, not 300 s
    error = caught.value
    assert "succeeded before every node printed a throughput" in error.message
    assert "master, worker-1" in error.message
    assert "train.throughput_pattern" in error.message + error.hint
    assert "Speedometer" in error.hint and "clusterkit logs c1" in error.hint


def test_a_job_silent_past_the_wait_fails_naming_the_pattern():
    """worker-1 prints rates, the master never does: after --rate-wait the error names
    the master alone; the wait was announced and the count of nodes with a rate said."""
    clock, events = Clock(), Collect()
    top = FakeTop(FakeJobCluster(2), [{0: [no_rate(1.0)],
                                       1: [{"t": 1.0, "samples_per_s": 50.0}]}])
    with pytest.raises(ClusterkitError) as caught:
        steady_rate(runtime(clock, events), top, 10.0, wait=30.0, ended=lambda: None)
    assert 30.0 < clock.now <= 32.0
    assert "no throughput from master within 30 s" in caught.value.message
    assert "train.throughput_pattern" in caught.value.message
    said = [e.text for e in events.events]
    assert said[0] == "scaling: waiting up to 30 s for a throughput line from each of 2 node(s)"
    assert "scaling: 1 of 2 node(s) printed a throughput so far" in said


def test_rates_on_every_node_are_measured_over_the_duration():
    clock, events = Clock(), Collect()
    first = {0: [{"t": 1.0, "samples_per_s": 90.0}], 1: [{"t": 1.0, "samples_per_s": 10.0}]}
    later = {0: [{"t": 5.0, "samples_per_s": 100.0}, {"t": 7.0, "samples_per_s": 120.0}],
             1: [{"t": 6.0, "samples_per_s": 50.0}]}
    top = FakeTop(FakeJobCluster(2), [first, later])
    ended = lambda: pytest.fail("the job's state is read only while a node has no rate")  # noqa: E731
    assert steady_rate(runtime(clock, events), top, 8.0, ended=ended) == 110.0 + 50.0
    assert clock.now == 8.0
