"""The protocol between a job's node supervisors: stdlib only, Python >= 3.8.

Shipped beside ``supervisor.py`` into every job dir (which imports it from there). The
master node's supervisor listens on the coordinator port (all interfaces); every other
node's supervisor dials it. Messages are newline-delimited JSON objects (``link.Link``),
``t`` their kind:

  hello {token, node, procs}    node -> master, first; a wrong token drops the link
  procs {procs}                 node -> master, whenever a process starts or ends
  hb                            both ways, every HEARTBEAT_S
  stop {state, reason, failed, others}
                                master -> node: the job's outcome, stop everything
  stop                          node -> master: stopped on request on that node
  notice {notice}               node -> master: EC2 posted a spot interruption notice
                                for that node, or its GPU health check found it unfit
                                (``interruption.Notice.to_json``)
  done                          node -> master: nothing of the job is left there
  left {notice}                 node -> master: an elastic job's node got a notice and
                                leaves (its torchrun agent stops; the others go on
                                smaller); a later hello for that index is its replacement

A stop for an interruption carries ``checkpoint_until`` (epoch seconds): every node sends
its processes the job's checkpoint signal at once and SIGTERM only then.

The master alone decides success or failure (``decide_outcome``, missing heartbeats); a
node decides only that it lost the master. An outcome is a ``jobstate.Outcome`` (state,
reason, the cause of a failure and the failures after it); a stop message holds its
``fields()``. The supervisor acts on what ``pump`` and ``verdict`` return and calls
``broadcast`` with its decision.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import socket
import time
from dataclasses import dataclass, field

try:  # imported as clusterkit.node.coord (the client, tests)
    from . import interruption, jobstate, wire
    from .jobfile import JobFile
    from .jobstate import Outcome
    from .link import Link, same_token
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import interruption
    import jobstate
    import wire
    from jobfile import JobFile
    from jobstate import Outcome
    from link import Link, same_token

WAITED_ROLES = jobstate.ROLES_WAITED
S = jobstate.JobStateName
HEARTBEAT_S = 1.0
TICK_S = 0.1
DIAL_S = 0.25  # a node without a link to the master dials it again this often
MASTER = 0  # the master is node 0: a node's link to it is links[MASTER]
WAKE = "wake"  # selector data of the supervisor's signal pipe


def decide_outcome(nodes: dict, num_nodes: int) -> Outcome | None:
    """The outcome from every node's reported processes, or None (go on). A failure's
    cause is the earliest by time, whichever node reported it first."""
    cause, others = jobstate.earliest(jobstate.process_failures(nodes))
    if cause is not None:
        return Outcome.failure(cause, others)
    waited = [p for i in nodes for p in nodes[i].values() if p.get("role") in WAITED_ROLES]
    if len(nodes) == num_nodes and waited and all(p.get("exit") == 0 for p in waited):
        return Outcome(S.SUCCEEDED, "every worker exited 0")
    return None


def stop_message(outcome: Outcome, checkpoint_until: float | None = None) -> dict:
    msg = {"t": "stop", **outcome.fields()}
    if checkpoint_until is not None:
        msg["checkpoint_until"] = checkpoint_until
    return msg


def heard_stop(msg: dict) -> Outcome:
    """The outcome a stop message carries (one that cannot be read: failed, saying so)."""
    try:
        return Outcome.from_json(msg, "the master's stop message")
    except wire.WireError as e:
        return Outcome(S.FAILED, str(e))


def interrupted_outcome(node: int, notice: interruption.Notice) -> Outcome:
    """The job's outcome when ``node`` got a spot interruption notice, found its GPUs
    unfit, or reached its Capacity Block's end."""
    if notice.kind is interruption.NoticeKind.UNFIT:
        return Outcome(S.INTERRUPTED, f"node {node}: its GPUs are unfit: {notice.reason}")
    when = time.strftime("%H:%M:%S UTC", time.gmtime(notice.at))
    if notice.action == interruption.BLOCK_END_ACTION:
        return Outcome(S.INTERRUPTED, f"node {node}: its Capacity Block ends (AWS terminates "
                       f"its instances from {when})")
    return Outcome(S.INTERRUPTED, f"node {node}: spot interruption notice ({notice.action} "
                   f"at {when})")


@dataclass
class Elastic:
    """An elastic job's side of the protocol."""

    left: set[int] = field(default_factory=set)  # nodes that left, not yet replaced
    sizes: list[list[float]] = field(default_factory=list)  # [epoch, nodes] at each change
    has_left: bool = False  # this node left the job (its hellos say so)


class Coordinator:
    """One node's end of the protocol: its links, what it heard and from whom."""

    def __init__(self, job: JobFile):
        self.job = job  # who this node is, where the master listens, the token, the graces
        self.sel, self.listener = selectors.DefaultSelector(), None
        self.links, self.nodes, self.seen, self.done_nodes = {}, {}, {}, set()
        self.outcome: Outcome | None = None  # what was decided
        self.heard: Outcome | None = None  # what the others asked of us, this pump
        self.checkpoint_until: float | None = None  # an interruption's SIGTERM time
        self.interruption: dict | None = None  # the first notice: node, when seen, action
        self.pending: list = []  # stop / done for the master, waiting for a link
        self.el = Elastic()
        if job.elastic_min and job.is_master:
            self.resized()
        self.started = time.monotonic()
        self.last = {"hb": 0.0, "dial": 0.0}  # when this node last sent a heartbeat, dialled

    @property
    def sizes(self) -> list[list[float]]:
        return self.el.sizes

    @property
    def me(self) -> int:
        return self.job.node_index

    @property
    def master(self) -> bool:
        return self.job.is_master

    @property
    def num_nodes(self) -> int:
        return self.job.coordinator.num_nodes

    @property
    def hb_timeout(self) -> float:
        return self.job.coordinator.heartbeat_timeout

    @property
    def addr(self) -> tuple:
        return (self.job.coordinator.host, self.job.coordinator.port)

    # -- what the supervisor tells the others
    def report(self, procs: dict) -> None:
        """This node's processes changed (``procs``: name -> view)."""
        self.nodes[self.me] = procs
        self._to_master({"t": "procs", "procs": procs})

    def request_stop(self) -> None:
        self._to_master({"t": "stop"})

    def send_done(self) -> None:
        self._to_master({"t": "done"})

    @property
    def elastic(self) -> bool:
        return self.job.elastic_min > 0

    def notice(self, notice: interruption.Notice) -> Outcome | None:
        """This node got a spot interruption notice: the master decides the job is
        interrupted (its outcome, returned); a node tells the master. A node of an
        elastic job leaves it instead (its own outcome, returned): the master decides
        whether the others go on."""
        if notice.kind not in interruption.STOPPING_KINDS:
            return None  # a rebalance recommendation stops nothing
        if self.master:
            return self.interrupt(self.me, notice)
        if self.elastic:
            self.el.has_left = True
            self._to_master({"t": "left", "notice": notice.to_json()})
            return Outcome(S.INTERRUPTED, "left the elastic job: " +
                           interrupted_outcome(self.me, notice).reason)
        self._to_master({"t": "notice", "notice": notice.to_json()})
        return None

    @property
    def size(self) -> int:
        """The nodes an elastic job has now (every node less those that left)."""
        return self.num_nodes - len(self.el.left)

    def resized(self) -> None:
        self.el.sizes.append([time.time(), self.size])

    def leave(self, node: int, notice: interruption.Notice) -> None:
        """The master: ``node`` left an elastic job; below its minimum the job is
        interrupted as any other (stopped, the lost nodes replaced, restarted)."""
        if node in self.el.left:
            return
        self.el.left.add(node)
        self.resized()
        if self.size < self.job.elastic_min:
            self.hear(self.interrupt(node, notice))

    def rejoined(self, node: int) -> None:
        """The master: a hello for a node that left: its replacement joins."""
        if node in self.el.left:
            self.el.left.discard(node)
            self.nodes.pop(node, None)
            self.done_nodes.discard(node)
            self.resized()

    def interrupt(self, node: int, notice: interruption.Notice) -> Outcome:
        """The outcome of ``node``'s notice; every process gets the job's checkpoint
        grace, capped to end before the instance goes (``interruption.grace_seconds``)."""
        if self.checkpoint_until is None:  # the first notice's grace is the one sent
            now = time.time()
            self.checkpoint_until = now + interruption.grace_seconds(
                notice, self.job.stopping.checkpoint_grace, now)
            self.interruption = dict(notice.to_json(), node=node, seen=now)
        return interrupted_outcome(node, notice)

    def broadcast(self, outcome: Outcome) -> None:
        """The decision taken here; the master passes it to every node, now and later."""
        self.outcome = outcome
        if self.master:
            for link in list(self.links.values()):
                link.send(stop_message(outcome, self.checkpoint_until))

    def heartbeat(self, now: float) -> None:
        if now - self.last["hb"] >= HEARTBEAT_S:
            self.last["hb"] = now
            for link in list(self.links.values()):
                link.send({"t": "hb"})

    def _to_master(self, msg: dict) -> None:
        """Send now when linked; a stop or done asked before the link is up (or on a
        link that broke) goes out right after the next hello, which carries the
        latest procs itself."""
        if self.master:
            return
        link = self.links.get(MASTER)
        if (link is None or not link.send(msg)) and msg.get("t") != "procs":
            self.pending.append(msg)

    # -- what the supervisor learns
    def verdict(self, now: float) -> Outcome | None:
        """The master: the job's outcome once there is one. A node: failed once the
        master has been silent for the heartbeat timeout."""
        if not self.master:
            if now - self.seen.get(MASTER, self.started) <= self.hb_timeout:
                return None
            host, port = self.addr
            return Outcome(S.FAILED, f"lost the master ({host}:{port}) for {self.hb_timeout:g}s")
        silent = []
        nodes = {i: p for i, p in self.nodes.items() if i not in self.el.left}
        for i in range(self.num_nodes):
            last = self.seen.get(i, self.started)
            if i != self.me and i not in self.el.left and now - last > self.hb_timeout:
                silent.append(jobstate.Failure(i, None, time=time.time() - (now - last)))
        if silent:  # last heard at `time`: earlier than a process that died after it
            cause, others = jobstate.earliest(jobstate.process_failures(nodes) + silent)
            return Outcome.failure(cause, others)
        return decide_outcome(nodes, self.size)

    def all_done(self) -> bool:
        """Every node linked to the master has said nothing is left there."""
        return not self.master or not set(self.links) - self.done_nodes - self.el.left

    # -- the network
    def listen(self) -> str | None:
        """The master's listener; the reason it failed, or None."""
        if not self.master:
            return None
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for _ in range(20):
            try:
                sock.bind(("", self.addr[1]))
                break
            except OSError:
                time.sleep(0.1)
        else:
            sock.close()
            return f"coordinator port {self.addr[1]} is in use"
        sock.listen(64)
        sock.setblocking(False)
        self.listener = sock
        self.sel.register(sock, selectors.EVENT_READ)
        return None

    def wake_on(self, fd: int) -> None:
        """End ``pump``'s wait at once when ``fd`` is readable: the supervisor's signal
        pipe (a process exited, a stop was asked), so nothing waits out a tick."""
        self.sel.register(fd, selectors.EVENT_READ, WAKE)

    def pump(self, dial: bool = True) -> Outcome | None:
        """Up to TICK_S of network I/O; a stop the others asked for, as an outcome."""
        self.heard = None
        for key, _ in self.sel.select(TICK_S):
            if key.data == WAKE:
                with contextlib.suppress(OSError):
                    os.read(key.fd, 512)
                continue
            if key.fileobj is self.listener:
                try:
                    sock, _ = self.listener.accept()
                except OSError:
                    continue
                self.sel.register(sock, selectors.EVENT_READ, Link(sock))
                continue
            msgs = key.data.read()
            for msg in msgs or []:
                if not self.handle(key.data, msg):
                    msgs = None
                    break
            if msgs is None:
                self.drop(key.data)
        now = time.monotonic()
        if (dial or self.pending) and not self.master and MASTER not in self.links \
                and now - self.last["dial"] >= DIAL_S:
            self.dial(now)
        return self.heard

    def dial(self, now: float) -> None:
        self.last["dial"] = now
        try:
            sock = socket.create_connection(self.addr, timeout=1.0)
        except OSError:
            return
        link = Link(sock, MASTER)
        hello = {"t": "hello", "token": self.job.coordinator.token, "node": self.me,
                 "procs": self.nodes.get(self.me, {}), **({"left": True} if self.el.has_left else {})}
        if link.send(hello) and all(link.send(msg) for msg in self.pending):
            self.pending.clear()
            self.links[MASTER] = link
            self.sel.register(sock, selectors.EVENT_READ, link)
        else:
            sock.close()

    def drop(self, link: Link) -> None:
        self.sel.unregister(link.sock)
        link.sock.close()
        if self.links.get(link.node) is link:
            del self.links[link.node]

    def hear(self, outcome: Outcome) -> None:
        if self.heard is None:
            self.heard = outcome

    def handle(self, link: Link, msg: dict) -> bool:
        """False drops the link (a stranger, or a peer breaking the protocol)."""
        kind, now = msg.get("t"), time.monotonic()
        if not self.master:
            self.seen[MASTER] = now
            if kind == "stop":
                until = msg.get("checkpoint_until")
                if isinstance(until, (int, float)) and not isinstance(until, bool):
                    self.checkpoint_until = float(until)
                self.hear(heard_stop(msg))
            return True
        if link.node is None and not self.greet(link, msg):
            return False
        self.seen[link.node] = now
        if link.node in self.el.left and (kind != "hello" or msg.get("left")):
            return True  # what a node that left still says changes nothing
        if kind == "hello" and not msg.get("left"):
            self.rejoined(link.node)
        if kind in ("hello", "procs") and isinstance(msg.get("procs"), dict):
            self.nodes[link.node] = msg["procs"]
        elif kind == "stop":
            self.hear(Outcome(S.STOPPED, f"stopped on request on node {link.node}"))
        elif kind == "done":
            self.done_nodes.add(link.node)
        elif kind == "left" and isinstance(msg.get("notice"), dict):
            notice = interruption.Notice.from_json(msg["notice"])
            if notice is not None and self.elastic:
                self.leave(link.node, notice)
        elif kind == "notice" and isinstance(msg.get("notice"), dict):
            notice = interruption.Notice.from_json(msg["notice"])
            if notice is not None and notice.kind in interruption.STOPPING_KINDS:
                self.hear(self.interrupt(link.node, notice))
        return True

    def greet(self, link: Link, msg: dict) -> bool:
        """A new link's first message: the job's token and a node index, else False."""
        node = msg.get("node")
        if msg.get("t") != "hello" or not same_token(msg.get("token"), self.job.coordinator.token) \
                or not isinstance(node, int) or isinstance(node, bool) \
                or not 0 <= node < self.num_nodes or node == self.me:
            return False
        if node in self.links:
            self.drop(self.links[node])
        link.node, self.links[node] = node, link
        link.send({"t": "hb"} if self.outcome is None
                  else stop_message(self.outcome, self.checkpoint_until))
        return True
