"""cluster.ops.uprecord: every event `up` reported is kept with when, passed on
unchanged, and read back as the cluster's last `up`."""

from __future__ import annotations

from clusterkit import statedir
from clusterkit.cluster.ops import uprecord
from clusterkit.events import Collect, Event, Kind, Stage
from clusterkit.kinds import InstanceState, Market
from clusterkit.plan.nodes import Node
from clusterkit.timeline.uptimeline import Mark


def test_recording_keeps_marks_and_passes_events_on(tmp_path, monkeypatch):
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path))
    ticks = iter([10.0, 10.5, 12.0, 13.0])
    seen = Collect()
    rec = uprecord.Recording(seen, clock=lambda: next(ticks))
    rec(Event(Kind.STAGE_STARTED, "creating stack", stage=Stage.STACK))
    rec(Event(Kind.PROGRESS, "i-1 reachable", stage=Stage.SSH, node="i-1"))
    assert [e.text for e in seen.events] == ["creating stack", "i-1 reachable"]
    assert rec.marks == [Mark(0.5, "stage-started", "stack"), Mark(2.0, "progress", "ssh", "i-1")]
    uprecord.save("rec-t", rec, ok=True)
    back = uprecord.load("rec-t")
    assert back is not None and back["ok"] is True and back["seconds"] == 3.0
    assert back["marks"] == rec.marks
    assert (statedir.cluster_dir("rec-t") / uprecord.FILE).stat().st_mode & 0o777 == 0o600
    assert uprecord.load("never-up") is None


def node(iid: str, index: int | None) -> Node:
    return Node(instance_id=iid, index=index, state=InstanceState.RUNNING,
                instance_type="c5.large", az="us-east-1a", market=Market.ON_DEMAND,
                region="us-east-1")


def test_the_record_names_each_node_by_role_for_the_chart(tmp_path, monkeypatch):
    """`up` tells the recording its nodes (name_nodes): master, worker-N in index order,
    kept in the record and read back; another reporter is left alone."""
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path))
    rec = uprecord.Recording(Collect())
    rec(Event(Kind.STAGE_STARTED, "waiting for SSH", stage=Stage.SSH))
    nodes = [node("i-b", 2), node("i-a", 0), node("i-c", 1), node("i-x", None)]
    uprecord.name_nodes(rec, nodes)
    assert list(rec.names.items()) == [("i-a", "master"), ("i-c", "worker-1"),
                                       ("i-b", "worker-2")]
    uprecord.name_nodes(Collect(), nodes)  # not a recording: nothing to tell
    uprecord.save("rec-n", rec, ok=False)
    back = uprecord.load("rec-n")
    assert back is not None and back["names"] == rec.names
