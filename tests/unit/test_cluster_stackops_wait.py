"""stackops.wait_stack: the poll that sees the stack done reports every event up to its
end. The stack's answers are given in order here (a stack that completes between a poll's
two reads is a race no emulator run can be made to hit every time)."""

from __future__ import annotations

from clusterkit.cluster.provision import stackops
from clusterkit.cluster.runtime import Runtime
from clusterkit.events import Collect


def test_the_last_events_are_reported(monkeypatch):
    statuses = iter(["CREATE_IN_PROGRESS", "CREATE_COMPLETE"])
    polls = {"n": 0}

    def record(session, region, stack_id):
        polls["n"] += 1
        return {"status": next(statuses), "outputs": {}}

    def events(session, region, stack_id):  # the final event lands right after a status read
        done = [{"id": "2", "resource": "clusterkit-x", "status": "CREATE_COMPLETE",
                 "reason": ""}] if polls["n"] >= 2 else []
        return [{"id": "1", "resource": "Role", "status": "CREATE_COMPLETE", "reason": ""},
                *done]

    monkeypatch.setattr(stackops.cfn, "stack_record", record)
    monkeypatch.setattr(stackops.cfn, "stack_events", events)
    seen = Collect()
    now = iter(float(t) for t in range(100))
    rt = Runtime(session=None, report=seen, poll=0.0, clock=lambda: next(now))
    final = stackops.wait_stack(rt, "us-east-1", "arn:stack", timeout=50)
    assert final["status"] == "CREATE_COMPLETE"
    assert [t.split()[1:] for t in seen.texts()] == [["Role", "CREATE_COMPLETE"],
                                                      ["clusterkit-x", "CREATE_COMPLETE"]]
