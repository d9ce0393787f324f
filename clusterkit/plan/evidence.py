"""Whether a node is lost, on evidence only. PURE: what is known of one node (facts) in,
the decision with its evidence in words out.

A node is lost only on

- an interruption notice (a spot instance-action, a Capacity Block's end) in its instance
  metadata, or its own GPU health check finding it unfit (the master's record of either);
- an EC2 state that says so: stopping, stopped, shutting-down, terminated, or no
  instance of its index listed at all (EC2 answered), or an impaired status check;
- silence longer than ``train.node_timeout``, heard by the master (its heartbeats, not
  this client's connections) and confirmed by EC2: EC2 answered and lists the instance.

Never on anything short of that: one failed SSH connection, a metadata endpoint error, a
slow answer, a restarted sshd, the client's own network dropping (the client not reaching
the master is no evidence about any node), a silence shorter than ``node_timeout``. Such
observations may be given as ``noise``: they are named in the evidence, never counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from clusterkit.kinds import InstanceState

# EC2 instance states that are evidence of a loss (pending is a node still booting).
LOST_STATES = (InstanceState.STOPPING, InstanceState.STOPPED, InstanceState.SHUTTING_DOWN,
               InstanceState.TERMINATED)


class Check(StrEnum):
    """An EC2 status check's value (DescribeInstanceStatus' Status)."""

    OK = "ok"
    IMPAIRED = "impaired"
    INITIALIZING = "initializing"
    INSUFFICIENT_DATA = "insufficient-data"
    NOT_APPLICABLE = "not-applicable"


class NoticeSeen(StrEnum):
    """The notice the master recorded for a node."""

    INTERRUPTION = "interruption"  # spot/instance-action (terminate, stop, hibernate)
    BLOCK_END = "block-end"  # its Capacity Block ends
    UNFIT = "unfit"  # its GPU health check (a fatal Xid, a GPU gone)


class Verdict(StrEnum):
    LOST = "lost"
    KEPT = "kept"  # no evidence of a loss
    UNCONFIRMED = "unconfirmed"  # silent past node_timeout, EC2 not answering: ask again


class Cause(StrEnum):
    """Why a node is lost (``plan.recovery.LossReason`` takes the same values)."""

    NOTICE = "notice"
    UNHEALTHY = "unhealthy"
    GONE = "gone"
    IMPAIRED = "impaired"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class Ec2Seen:
    """What EC2 answered for one node index: its instance's state (None: no instance of
    that index is listed) and its status check (the worse of system and instance; None:
    not asked)."""

    state: InstanceState | None
    check: Check | None = None


@dataclass(frozen=True)
class NodeFacts:
    index: int
    notice: NoticeSeen | None = None
    notice_action: str | None = None  # terminate | stop | hibernate | block-end
    ec2: Ec2Seen | None = None  # None: EC2 was not asked or did not answer
    silent_s: float | None = None  # the master heard nothing from it this long
    noise: Sequence[str] = ()  # observations that are never evidence, for the log


@dataclass(frozen=True)
class NodeDecision:
    index: int
    verdict: Verdict
    cause: Cause | None
    evidence: str  # the facts that decided, in words (the job's log, its record)


def decide(facts: NodeFacts, node_timeout: float) -> NodeDecision:
    """The decision on one node from ``facts`` (rules in the module's docstring)."""
    ec2 = facts.ec2
    ec2_words = _ec2_words(ec2)
    noise = f"; not evidence: {', '.join(facts.noise)}" if facts.noise else ""
    if facts.notice in (NoticeSeen.INTERRUPTION, NoticeSeen.BLOCK_END):
        action = f" (action {facts.notice_action})" if facts.notice_action else ""
        return _lost(facts, Cause.NOTICE, f"{facts.notice} notice in its metadata{action}")
    if facts.notice is NoticeSeen.UNFIT:
        return _lost(facts, Cause.UNHEALTHY, "its GPU health check found it unfit")
    if ec2 is not None and (ec2.state is None or ec2.state in LOST_STATES):
        return _lost(facts, Cause.GONE, ec2_words)
    if ec2 is not None and ec2.check is Check.IMPAIRED:
        return _lost(facts, Cause.IMPAIRED, ec2_words)
    if facts.silent_s is None:
        return NodeDecision(facts.index, Verdict.KEPT, None,
                            f"no evidence of a loss ({ec2_words}){noise}")
    silence = f"silent {facts.silent_s:.0f} s to the master (node_timeout {node_timeout:.0f} s)"
    if facts.silent_s < node_timeout:
        return NodeDecision(facts.index, Verdict.KEPT, None,
                            f"{silence}: shorter than node_timeout{noise}")
    if ec2 is None:
        return NodeDecision(facts.index, Verdict.UNCONFIRMED, None,
                            f"{silence}, not confirmed: EC2 did not answer{noise}")
    return _lost(facts, Cause.UNREACHABLE, f"{silence}; {ec2_words}")


def decide_all(facts: Sequence[NodeFacts], node_timeout: float) -> list[NodeDecision]:
    return [decide(f, node_timeout) for f in facts]


def _lost(facts: NodeFacts, cause: Cause, words: str) -> NodeDecision:
    noise = f"; also seen, not evidence: {', '.join(facts.noise)}" if facts.noise else ""
    return NodeDecision(facts.index, Verdict.LOST, cause, words + noise)


def _ec2_words(ec2: Ec2Seen | None) -> str:
    if ec2 is None:
        return "EC2 did not answer"
    if ec2.state is None:
        return "EC2 lists no instance for it"
    check = f", status check {ec2.check}" if ec2.check is not None else ""
    return f"EC2: {ec2.state}{check}"
