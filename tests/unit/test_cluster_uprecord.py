"""cluster.ops.uprecord: every event `up` reported is kept with when, passed on
unchanged, and read back as the cluster's last `up`."""

from __future__ import annotations

from clusterkit import statedir
from clusterkit.cluster.ops import uprecord
from clusterkit.events import Collect, Event, Kind, Stage
from clusterkit.plan.uptimeline import Mark


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
