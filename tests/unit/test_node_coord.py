"""The supervisors' protocol: message framing, the master's verdict, and two Coordinators
talking over a real socket on 127.0.0.1 (no daemon, no processes)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from clusterkit.node import coord
from clusterkit.node.jobfile import JobFile
from clusterkit.node.jobstate import Failure, Outcome
from clusterkit.node.link import Link
from tests.support import wait_for

TOKEN = "ab" * 16


def _procs(*items: tuple[str, str, int | None]) -> dict:
    return {name: {"role": role, "exit": code, "state": "running" if code is None else "exited"}
            for name, role, code in items}


OUTCOMES = sorted((Path(__file__).parent / "training_outcome").glob("*.json"))


@pytest.mark.parametrize("case", OUTCOMES, ids=lambda p: p.stem)
def test_the_master_decides_the_outcome_from_every_nodes_processes(case: Path) -> None:
    """Outcome cases as data: the processes each node reported -> the job's outcome
    (None: go on), the cause of a failure being the earliest by time."""
    data = json.loads(case.read_text())
    nodes = {int(index): procs for index, procs in data["nodes"].items()}
    decided = coord.decide_outcome(nodes, data["num_nodes"])
    want = data["outcome"]
    if want is None:
        assert decided is None
        return
    assert decided.fields() == {k: want[k] for k in ("state", "reason", "failed", "others")}


def test_link_reads_whole_lines_and_drops_garbage() -> None:
    a, b = socket.socketpair()
    link = Link(b)
    a.sendall(b'{"t": "hb"}\n{"t": "pr')
    assert link.read() == [{"t": "hb"}]
    a.sendall(b'ocs"}\n')
    assert link.read() == [{"t": "procs"}]
    a.sendall(b"[1, 2]\n")  # JSON, but not a message: would crash whoever reads .get
    assert link.read() is None
    a.sendall(b"not json\n")
    assert Link(b).read() is None
    a.close()
    assert Link(b).read() is None  # peer gone
    b.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _job(node: int, port: int, token: str = TOKEN, hb: float = 15,
         grace: float = 90.0) -> JobFile:
    return JobFile.from_json({"node_index": node, "is_master": node == 0, "num_nodes": 2,
                              "heartbeat_timeout": hb, "checkpoint_grace": grace,
                              "coordinator": {"host": "127.0.0.1", "port": port,
                                              "token": token}}, "test")


def _pump_until(cond, *coords: coord.Coordinator, timeout: float = 10) -> list:
    """Pump every coordinator until ``cond()``; what each one heard, in order."""
    heard: list = []

    def step() -> bool:
        for c in coords:
            got = c.pump()
            if got is not None:
                heard.append((c.me, got))
        return cond()
    wait_for(step, "coordinators", timeout)
    return heard


@pytest.fixture
def pair():
    port = _free_port()
    master, node = coord.Coordinator(_job(0, port)), coord.Coordinator(_job(1, port))
    assert master.listen() is None
    yield master, node
    for c in (master, node):
        for link in list(c.links.values()):
            c.drop(link)
        if c.listener is not None:
            c.listener.close()


def test_a_node_reports_to_the_master_which_decides_success(pair) -> None:
    master, node = pair
    master.report(_procs(("scheduler", "scheduler", None), ("worker-0", "worker", None)))
    node.report(_procs(("worker-0", "worker", None)))  # not linked yet: kept for hello
    _pump_until(lambda: 1 in master.nodes, master, node)
    assert master.verdict(time.monotonic()) is None
    node.report(_procs(("worker-0", "worker", 0)))
    master.report(_procs(("scheduler", "scheduler", None), ("worker-0", "worker", 0)))
    _pump_until(lambda: master.nodes[1]["worker-0"]["exit"] == 0, master, node)
    outcome = master.verdict(time.monotonic())
    assert outcome == Outcome("succeeded", "every worker exited 0")
    master.broadcast(outcome)
    heard = _pump_until(lambda: node.heard is not None, master, node)
    assert heard == [(1, outcome)]
    assert not master.all_done()
    node.send_done()
    _pump_until(master.all_done, master, node)


def test_a_stop_asked_on_a_node_reaches_the_master(pair) -> None:
    master, node = pair
    _pump_until(lambda: 1 in master.links, master, node)
    node.request_stop()
    heard = _pump_until(lambda: master.heard is not None, master, node)
    assert heard == [(0, Outcome("stopped", "stopped on request on node 1"))]


def test_a_nodes_interruption_notice_interrupts_the_job_with_a_checkpoint_grace(pair) -> None:
    """Node 1's notice reaches the master, which decides the job is interrupted and
    gives every process the checkpoint grace, cut to end 10 s before the instance goes
    (notice 60 s ahead, grace 90 s: 50 s); the stop carries it to the node. A rebalance
    recommendation stops nothing."""
    from clusterkit.node import interruption
    from clusterkit.node.interruption import Notice, NoticeKind

    master, node = pair  # a checkpoint grace of 90 s (_job)
    _pump_until(lambda: 1 in master.links, master, node)
    node.notice(Notice(NoticeKind.REBALANCE, time.time()))
    notice = Notice(NoticeKind.INTERRUPTION, time.time() + 60, "terminate")
    node.notice(notice)
    heard = _pump_until(lambda: master.heard is not None, master, node)
    [(who, outcome)] = heard
    assert who == 0 and outcome.state == "interrupted"
    assert outcome.reason.startswith("node 1: spot interruption notice (terminate at ")
    # the grace (90 s) is longer than the notice leaves: it ends MARGIN s before the action
    assert master.checkpoint_until == pytest.approx(notice.at - interruption.MARGIN, abs=1e-3)
    first = master.checkpoint_until  # a later notice (another node's) does not move it
    master.interrupt(1, Notice(NoticeKind.INTERRUPTION, notice.at + 100, "terminate"))
    assert master.checkpoint_until == first
    master.broadcast(outcome)
    _pump_until(lambda: node.heard is not None, master, node)
    assert node.heard == outcome and node.checkpoint_until == master.checkpoint_until


def test_a_node_whose_gpus_are_unfit_interrupts_the_job_with_the_whole_grace(pair) -> None:
    """Node 1's GPU health check found it unfit: the master interrupts the job naming
    the evidence, and every process gets the whole checkpoint grace (no deadline)."""
    from clusterkit.node.interruption import Notice, NoticeKind

    master, node = pair  # a checkpoint grace of 90 s (_job)
    _pump_until(lambda: 1 in master.links, master, node)
    now = time.time()
    node.notice(Notice(NoticeKind.UNFIT, now, "replace", "Xid 79 on 0000:b3:00.0"))
    [(who, outcome)] = _pump_until(lambda: master.heard is not None, master, node)
    assert who == 0 and outcome == Outcome("interrupted", "node 1: its GPUs are unfit: Xid 79 "
                                           "on 0000:b3:00.0")
    assert master.checkpoint_until == pytest.approx(now + 90.0, abs=2)
    assert master.interruption["kind"] == "unfit" and master.interruption["node"] == 1
    assert master.interruption["reason"] == "Xid 79 on 0000:b3:00.0"


def test_a_stop_asked_before_the_link_is_up_still_reaches_the_master(pair) -> None:
    """Both supervisors start at once: a node may be asked to stop before its first
    dial reached the master's listener; the stop must not be lost (the master would
    then see only the SIGTERMed processes and call the job failed)."""
    master, node = pair
    node.request_stop()  # no link yet
    node.report(_procs(("worker-0", "worker", -15)))
    heard = _pump_until(lambda: master.heard is not None, master, node)
    assert heard[0] == (0, Outcome("stopped", "stopped on request on node 1"))
    assert node.pending == []


def test_a_node_done_locally_still_dials_to_deliver_what_waits(pair) -> None:
    master, node = pair
    node.send_done()  # no link yet; the supervisor stops dialling once done locally
    wait_for(lambda: node.pump(dial=False) is None and master.pump() is None
             and 1 in master.done_nodes, "done delivered")


def _closed(sock: socket.socket) -> bool:
    try:
        data = sock.recv(100)
    except BlockingIOError:  # nothing yet
        return False
    assert data == b"", data  # the master answers a stranger nothing
    return True


def test_the_master_drops_strangers_and_their_messages(pair) -> None:
    master, _node = pair
    for hello in ({"t": "hello", "token": "x" * 32, "node": 1},  # wrong token
                  {"t": "hello", "token": "é", "node": 1},  # not even ASCII
                  {"t": "hello", "token": TOKEN, "node": 0},  # the master itself
                  {"t": "hello", "token": TOKEN, "node": True},
                  {"t": "procs", "token": TOKEN, "node": 1}):  # no hello first
        with socket.create_connection(master.addr, timeout=2) as s:
            s.sendall((json.dumps(hello) + "\n").encode())
            s.setblocking(False)
            _pump_until(lambda s=s: _closed(s), master)
        assert master.links == {} and 1 not in master.nodes
    assert len(master.sel.get_map()) == 1  # the listener alone


def test_heartbeat_silence_fails_the_job_on_either_side() -> None:
    port, before = _free_port(), time.time()
    master = coord.Coordinator(_job(0, port, hb=0.2))
    node = coord.Coordinator(_job(1, port, hb=0.2))
    later = 0.3  # past the heartbeat timeout on the clock the verdict is given (no sleep)
    now = time.monotonic() + later
    verdict = master.verdict(now)
    state, reason, failed, others = verdict.state, verdict.reason, verdict.failed, \
        verdict.others
    wall = time.time()
    assert (state, reason, others) == ("failed", "node 1 stopped answering", ())
    assert (failed.node, failed.process, failed.exit, failed.signal) == (1, None, None, None)
    # when it was last heard: the start, as seen `later` seconds on
    assert before - later <= failed.time <= wall - later
    assert node.verdict(now) == Outcome("failed", f"lost the master (127.0.0.1:{port}) for "
                                        "0.2s")
    assert isinstance(failed, Failure)


def _elastic_job(node: int, port: int) -> JobFile:
    job = _job(node, port, hb=2)
    return JobFile.from_json({**job.to_json(), "num_nodes": 3, "elastic_min": 2,
                              "coordinator": {"host": "127.0.0.1", "port": port,
                                              "token": TOKEN}}, "test")


def test_an_elastic_jobs_node_leaves_on_a_notice_and_its_replacement_rejoins() -> None:
    """issue 42: in an elastic job (3 nodes, min 2) node 2's notice is its own leaving
    (it stops; the master decides nothing, counts neither its processes' ends nor its
    silence, and the job's size is 2); a new node 2's hello is its replacement (size 3
    again); with another node gone below the minimum the job is interrupted as any."""
    from clusterkit.node.interruption import Notice, NoticeKind

    port = _free_port()
    master, one, two = (coord.Coordinator(_elastic_job(i, port)) for i in range(3))
    assert master.listen() is None
    try:
        _pump_until(lambda: {1, 2} <= set(master.links), master, one, two)
        notice = Notice(NoticeKind.INTERRUPTION, time.time() + 60, "terminate")
        mine = two.notice(notice)
        assert mine is not None and mine.state == "interrupted"
        assert mine.reason.startswith("left the elastic job: node 2: spot interruption")
        two.report(_procs(("torchrun", "torchrun", -15)))  # its agent stopped: sent with it
        _pump_until(lambda: master.el.left == {2}, master, one, two)
        assert not master.nodes.get(2)  # its stopped agent is not a failure
        assert master.heard is None and [n for _, n in master.sizes] == [3, 2]
        two.drop(two.links[0])
        now = time.monotonic()
        master.seen[2] = now - 60  # silent long past its heartbeat timeout
        assert master.verdict(now) is None
        new = coord.Coordinator(_elastic_job(2, port))
        _pump_until(lambda: not master.el.left, master, one, new)
        assert [n for _, n in master.sizes] == [3, 2, 3]
        assert one.notice(notice) is not None and new.notice(notice) is not None
        heard = _pump_until(lambda: master.heard is not None, master, one, new)
        assert [n for _, n in master.sizes] == [3, 2, 3, 2, 1]
        assert heard[0][1].state == "interrupted"  # 1 node of min 2: stopped, recovered
    finally:
        for c in (master, one, two):
            for link in list(c.links.values()):
                c.drop(link)
        master.listener.close()


def test_an_elastic_jobs_master_does_not_leave_its_notice_interrupts_the_job() -> None:
    """issue 42: the master hosts the rendezvous and the coordinator, so its own notice
    is no leaving: the job is interrupted with its checkpoint grace, as any job's, and
    recovered by today's path (stop, replace, restart)."""
    from clusterkit.node.interruption import Notice, NoticeKind

    master = coord.Coordinator(_elastic_job(0, _free_port()))
    assert master.elastic
    outcome = master.notice(Notice(NoticeKind.INTERRUPTION, time.time() + 60, "terminate"))
    assert outcome is not None and outcome.state == "interrupted"
    assert outcome.reason.startswith("node 0: spot interruption notice")
    assert not master.el.left and not master.el.has_left
