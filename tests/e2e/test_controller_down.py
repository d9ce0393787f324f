"""`down` of a cluster whose detached job's recovery controller runs (issue 39): `down`
stops the controller on the master before it deletes anything, or the controller would
replace the nodes `down` terminates. The order is `down`'s own events; the controller,
stopped by TERM, retires (its key off the nodes, the master's node profile back) and
leaves no process; nothing of the cluster is left.

What cannot run here: EC2 itself (moto), and the controller's role is not enforced (the
emulator takes any credentials: tests/unit/test_scripts_iam_policy.py holds the role)."""

from __future__ import annotations

import sysconfig
from pathlib import Path

from bench import resumable
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.events import Event
from tests import support
from tests.e2e.clusters import sandbox_spec, user_session
from tests.e2e.test_train import Cluster
from tests.e2e.test_train_recovery import SECTIONS, controller_processes
from tests.integration.conftest import leftovers, runtime


def test_down_stops_the_recovery_controller_before_it_deletes_anything(sandbox, tmp_path):
    support.require_root("the sandbox's SSH nodes")
    name = support.unique_name("cd")
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=2, instance_type="c5.large", extra=SECTIONS.format(
        site=sysconfig.get_paths()["purelib"], steps=100000, pause=0.4)))
    work = tmp_path / "work"
    work.mkdir()
    (work / "resumable.py").write_text(Path(resumable.__file__).read_text())
    cluster = Cluster(name, spec, work)
    with user_session(sandbox, tmp_path):
        try:
            master = next(n.instance_id for n in do_up(str(spec), yes=True, rt=runtime()).nodes
                          if n.index == 0)
            started = cluster.train(detach=True, max_recoveries=1)
            assert started.detached and started.state == "running"
            assert len(controller_processes(sandbox.endpoint)) == 1
            events: list[Event] = []
            rt = runtime()
            rt.report = events.append
            do_down(str(spec), yes=True, rt=rt)
            check_stopped_first([e.text for e in events], master)
            assert not controller_processes(sandbox.endpoint)
            assert leftovers(name) == {}
        finally:
            if leftovers(name):  # the test failed before or in `down`
                do_down(str(spec), yes=True, rt=runtime())


def check_stopped_first(texts: list[str], master: str) -> None:
    """`down` showed the controller as the first thing to stop, stopped it (TERM was
    enough: not killed) and only then terminated an instance."""
    planned = texts.index(f"us-east-1: recovery controller to stop first, on the master: "
                          f"{master}")
    stopping = texts.index(f"stopping the recovery controller on the master {master} (it "
                           "would replace the nodes being deleted)")
    stopped = texts.index("the recovery controller on the master stopped")
    terminating = min(i for i, t in enumerate(texts) if t.startswith("terminating instance"))
    assert planned < stopping < stopped < terminating, texts
