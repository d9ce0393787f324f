"""`train`'s check of the job's own network: while it follows a job on EFA-capable nodes,
each node's first NCCL lines (``NCCL INFO`` / ``NCCL WARN``: NCCL's start-up and network
lines, which ``topology.nccl_debug_env`` turns on) are read until NCCL's own line names
the network it chose (``nccl.parse_transport`` confirmed), then weighed with
``nccl.transport_problem`` against the EFA interfaces the type has.

- A problem is said at once, once per cause (``[transport] critical: node worker-1: …``),
  and kept as a finding of the job's outcome and report.
- Under ``network.efa: true`` a job not on EFA at all (a critical finding) is stopped: the
  watcher sets its ``stop`` event (ending the follow) and says why in ``stop_reason``;
  the caller stops the job (``train.follow_job``). EFA on fewer interfaces than the type
  has is a warning: said, not stopped.
- EFA on every node is one line: ``[transport] NET/OFI efa, 4 NICs on every node``.
- After a node's decision only its NCCL WARN lines are read (peers EFA cannot reach show
  up there, later); at most ``MAX_LINES`` NCCL lines are kept per node.

The sandbox has no EFA: its types have no EFA interface, so no watcher is made there, and
its jobs print no NCCL line. Tested with the real captures fed through ``add``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

from clusterkit.catalog.instances import lookup as instance_type
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.node.jobstate import JobStateName
from clusterkit.spec.model import Spec
from clusterkit.training.nccl import (
    Cause,
    Net,
    Severity,
    Transport,
    TransportFinding,
    parse_transport,
    transport_problem,
)

NCCL_MARKERS = ("NCCL INFO", "NCCL WARN")  # NCCL's own log lines (any prefix before)
# NCCL lines kept per node: a rank's INIT,NET start-up is a few dozen lines and NCCL names
# its network early in it; 8 ranks per node interleaved stay well under this. A node
# still undecided here is decided with what it printed.
MAX_LINES = 400
FINDING_KIND = "transport"  # the report's finding kind (diagnose's are metric findings)


def expected_efa(spec: Spec | None, type_name: str) -> int:
    """The EFA interfaces each node of ``type_name`` is expected to use: the catalog's
    count when the spec wants EFA (``network.efa`` auto or true), else 0."""
    itype = instance_type(type_name)
    if itype is None or (spec is not None and not spec.network.efa_wanted):
        return 0
    return itype.efa_interfaces


def describe(transport: Transport) -> str:
    """``NET/OFI efa``, ``NET/OFI tcp``, ``NET/Socket (eth0)``, ``NET/IB``."""
    if transport.kind is Net.OFI:
        return f"NET/OFI {transport.provider}" if transport.provider else "NET/OFI"
    if transport.kind is Net.SOCKET:
        where = f" ({', '.join(transport.interfaces)})" if transport.interfaces else ""
        return f"NET/Socket{where}"
    return "NET/IB"


@dataclass
class Told:
    """A finding said once, and every node it was found on."""

    finding: TransportFinding
    transport: str  # ``describe`` of the first node's transport
    nodes: list[str]

    def to_json(self) -> dict[str, Any]:
        f = self.finding
        return {"kind": FINDING_KIND, "cause": f.cause.value, "severity": f.severity.value,
                "nodes": list(self.nodes), "transport": self.transport,
                "evidence": f"{f.summary} (NCCL: {f.evidence})", "fix": f.fix,
                "also_possible": list(f.also_possible)}


@dataclass
class TransportWatch:
    """The NCCL lines of one job's nodes (``add``, from the log stream), the decision per
    node, what was said, and whether the job must stop."""

    nodes: tuple[str, ...]  # the job's nodes' short names: master, worker-1, …
    expected_efa: int  # > 0
    required: bool  # network.efa: "true": a job not on EFA is stopped
    say: Callable[[str], None]
    stop: threading.Event = field(default_factory=threading.Event)
    lines: dict[str, list[str]] = field(default_factory=dict)
    decided: dict[str, Transport] = field(default_factory=dict)
    told: dict[Cause, Told] = field(default_factory=dict)
    stop_reason: str | None = None
    all_said: bool = False

    def add(self, node: str, text: str) -> None:
        """One log line of ``node``'s processes."""
        if not any(marker in text for marker in NCCL_MARKERS):
            return
        kept = self.lines.setdefault(node, [])
        done = node in self.decided
        if len(kept) >= MAX_LINES or (done and "NCCL WARN" not in text):
            return
        kept.append(text)
        transport = parse_transport(kept)
        if transport is not None and (done or transport.confirmed or len(kept) >= MAX_LINES):
            self._decide(node, transport, may_stop=True)

    def finish(self) -> tuple[dict[str, Any], ...]:
        """The follow ended: each undecided node decided with what it printed (the job
        is over: nothing is stopped); the findings."""
        for node, kept in self.lines.items():
            transport = parse_transport(kept) if node not in self.decided else None
            if transport is not None:
                self._decide(node, transport, may_stop=False)
        return self.findings()

    def findings(self) -> tuple[dict[str, Any], ...]:
        return tuple(told.to_json() for told in self.told.values())

    def _decide(self, node: str, transport: Transport, *, may_stop: bool) -> None:
        self.decided[node] = transport
        problem = transport_problem(transport, self.expected_efa)
        if problem is None:
            self._on_efa_everywhere()
            return
        told = self.told.get(problem.cause)
        if told is not None:
            if node not in told.nodes:
                told.nodes.append(node)
        else:
            self.told[problem.cause] = Told(problem, describe(transport), [node])
            self.say(f"[transport] {problem.severity.value}: node {node}: {problem.summary} "
                     f"(NCCL: {problem.evidence}); fix: {problem.fix}")
        if may_stop and self.required and problem.severity is Severity.CRITICAL \
                and self.stop_reason is None:
            self._stop(node, transport, problem)

    def _stop(self, node: str, transport: Transport, problem: TransportFinding) -> None:
        self.stop_reason = (f"network.efa is true and NCCL on {node} chose "
                            f"{describe(transport)}, not EFA: {problem.summary}")
        self.say(f"[transport] stopping the job: {self.stop_reason}")
        self.stop.set()

    def _on_efa_everywhere(self) -> None:
        """Said once, when every node decided and none has a problem (a node's log cut
        before its provider line counts with the others' provider and NIC count)."""
        if self.all_said or self.told or set(self.nodes) - set(self.decided):
            return
        self.all_said = True
        providers = {t.provider for t in self.decided.values() if t.provider}
        counts = [t.nics for t in self.decided.values() if t.nics is not None]
        name = "NET/OFI efa" if providers == {"efa"} else "NET/OFI"
        if not counts:
            self.say(f"[transport] {name} on every node (this aws-ofi-nccl does not print "
                     "how many NICs it uses)")
            return
        nics = min(counts)
        self.say(f"[transport] {name}, {nics} NIC{'s' if nics != 1 else ''} on every node")


def watch_for(jc: JobCluster, out: TextIO | None) -> TransportWatch | None:
    """A watcher for the job on ``jc`` (its lines said on ``out``); None where EFA is
    not expected (a type without EFA, ``network.efa: false``)."""
    efa = expected_efa(jc.spec, jc.nodes[0].instance_type)
    if efa <= 0:
        return None

    def say(line: str) -> None:
        if out is not None:
            out.write(line + "\n")
            out.flush()

    required = jc.spec is not None and jc.spec.network.efa == "true"
    return TransportWatch(tuple(jc.node_name(n.index or 0) for n in jc.nodes), efa,
                          required, say)


def stop_off_efa(jc: JobCluster, job_id: str, watch: TransportWatch,
                 found: tuple[dict[str, Any], ...] = ()) -> JobOutcome:
    """The job ``watch`` wants stopped, stopped on every node (on fresh connections, as
    Ctrl-C does: the follow that ended may have left its own half closed): STOPPED,
    with the watcher's reason, and its findings after ``found``."""
    result = jobs.stop_job(dataclasses.replace(jc, pool=None), job_id)
    master = result.nodes.get(jc.node_name(0))
    return JobOutcome(jc.name, job_id, JobStateName.STOPPED, watch.stop_reason,
                      final=master.state if master is not None else None,
                      findings=found + watch.findings())
