"""Autostop's rules, PURE and stdlib only (Python >= 3.8): durations, the watchdog's
config, what counts as activity, when a cluster is idle, and the messages between the
watchdogs (signed and checked by ``link``).

Shipped beside ``watchdog.py`` to every node (``bundle.WATCHDOG``) and imported by the
client as ``clusterkit.node.autostop_policy``: both sides read the same definitions.
Nothing here reads a clock, a file or the network; times are passed in.

The master's watchdog keeps the cluster's clock: any node's activity (a job whose
supervisor is alive, an SSH session with a terminal) sets the last activity to now;
once nothing has been active for ``idle_s`` the master decides, tells each worker as it
reports (workers first), then powers itself off.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

VERSION = 1
ACTIONS = ("terminate", "stop")  # the instances' InstanceInitiatedShutdownBehavior
MIN_IDLE_S = 10
MAX_IDLE_S = 30 * 86400
DEFAULT_PORT = 7078  # the master's watchdog listens on its in-cluster address
DEFAULT_POLL_S = 5.0  # a worker reports this often
# after its decision the master waits this long (beyond two polls) for workers that do not
# report, then powers off anyway
TELL_GRACE_S = 30.0
# the master powers off this long after it told the last worker: the workers go first
DRAIN_S = 3.0
# a worker that cannot reach the master for this long (at least), while itself idle for
# the idle time, powers itself off: a master that is gone must not leave workers billing
ORPHAN_MIN_S = 120.0
_DURATION_RE = re.compile(r"^(?:([0-9]+)d)?(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$")
DURATION_PATTERN = r"^(off|(?=[0-9])([0-9]+d)?([0-9]+h)?([0-9]+m)?([0-9]+s)?)$"  # the spec's
DURATION_HINT = "a duration like 20s, 30m, 2h or 1h30m (at least 10s, at most 30d), or off"


def duration_seconds(text: str) -> int:
    """``20s``, ``30m``, ``2h``, ``1h30m``, ``1d`` -> seconds, in any range; ValueError
    otherwise (a bare number too: the unit is never guessed)."""
    found = _DURATION_RE.match(text.strip()) if text.strip() else None
    if found is None or not any(found.groups()):
        raise ValueError(f"not a duration: {text!r} ({DURATION_HINT})")
    days, hours, minutes, seconds = (int(g or 0) for g in found.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def range_problem(seconds: int) -> str | None:
    """Why an idle time of ``seconds`` is refused (None: it is not)."""
    if MIN_IDLE_S <= seconds <= MAX_IDLE_S:
        return None
    return (f"{format_duration(seconds)} is out of range: autostop waits at least "
            f"{MIN_IDLE_S}s and at most 30d")


def parse_duration(text: str) -> int:
    """``duration_seconds`` within MIN_IDLE_S..MAX_IDLE_S; ValueError otherwise."""
    seconds = duration_seconds(text)
    problem = range_problem(seconds)
    if problem:
        raise ValueError(problem)
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as the shortest duration text: 20s, 30m, 1h30m, 2d; 0s for <= 0."""
    left = max(0, int(round(seconds)))
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


# -- the watchdog's config ----------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """What the watchdog of one node runs by (``paths.AUTOSTOP_CONFIG``)."""

    cluster: str
    node: int  # this node's index: 0 is the master
    nodes: int  # how many nodes the cluster has
    master: str  # the master's in-cluster address
    idle_s: int
    action: str = "terminate"
    token: str = field(default="", repr=False)  # the shared secret of the messages
    port: int = DEFAULT_PORT
    poll_s: float = DEFAULT_POLL_S

    @property
    def is_master(self) -> bool:
        return self.node == 0

    def to_dict(self) -> dict:
        return {"version": VERSION, "cluster": self.cluster, "node": self.node,
                "nodes": self.nodes, "master": self.master, "idle_s": self.idle_s,
                "action": self.action, "token": self.token, "port": self.port,
                "poll_s": self.poll_s}

    def setting(self) -> dict:
        """What the client shows and compares (no token)."""
        return {"idle_s": self.idle_s, "action": self.action}


def config_from(data: object) -> Config:
    """A decoded autostop.json as a Config; ValueError naming what is wrong."""
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise ValueError("not an autostop config of this version")
    try:
        cfg = Config(cluster=str(data["cluster"]), node=int(data["node"]),
                     nodes=int(data["nodes"]), master=str(data["master"]),
                     idle_s=int(data["idle_s"]), action=str(data["action"]),
                     token=str(data["token"]), port=int(data["port"]),
                     poll_s=float(data["poll_s"]))
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"autostop config: {e}") from None
    problems = [why for bad, why in (
        (cfg.action not in ACTIONS, f"action {cfg.action!r}"),
        (not MIN_IDLE_S <= cfg.idle_s <= MAX_IDLE_S, f"idle_s {cfg.idle_s}"),
        (not 0 <= cfg.node < cfg.nodes, f"node {cfg.node} of {cfg.nodes}"),
        (len(cfg.token) < 32, "token too short"),
        (not 1 <= cfg.port <= 65535, f"port {cfg.port}"),
        (not 0.1 <= cfg.poll_s <= 300, f"poll_s {cfg.poll_s}"),
        (not re.match(r"^[0-9A-Za-z.:-]+$", cfg.master), f"master {cfg.master!r}")) if bad]
    if problems:
        raise ValueError("autostop config: bad " + ", ".join(problems))
    return cfg


# -- activity -----------------------------------------------------------------------------

ACTIVE_JOB_STATES = ("starting", "running", "stopping")  # jobstate.ACTIVE
_SESSION_RE = re.compile(r"^sshd(?:-session)?: (\S+)@(pts/[0-9]+)")


def session_tty(cmdline: str) -> str | None:
    """``user@pts/N`` when a process's command line is the sshd process of an SSH
    session with a terminal (``sshd: ubuntu@pts/0``; OpenSSH >= 9.8:
    ``sshd-session: ...``); None for anything else (``sshd: ubuntu@notty``, the listener,
    ``sshd: ubuntu [priv]``)."""
    found = _SESSION_RE.match(cmdline.replace("\0", " ").strip())
    return f"{found.group(1)}@{found.group(2)}" if found else None


def activity(jobs: list[tuple[str, str, bool]], sessions: list[str]) -> list[str]:
    """Why a node is active now, in words (empty: idle). ``jobs``: (job id, the state its
    state.json says, whether its supervisor lives); a job counts while its state is
    active and its supervisor lives (a crashed supervisor keeps nothing up).
    ``sessions``: ``user@pts/N`` of the open SSH sessions with a terminal."""
    reasons = [f"job {job_id} {state}" for job_id, state, alive in sorted(jobs)
               if state in ACTIVE_JOB_STATES and alive]
    reasons += [f"ssh session {s}" for s in sorted(sessions)]
    return reasons


# -- the master's clock and decision ------------------------------------------------------

@dataclass(frozen=True)
class Clock:
    """The master's view of the cluster: when anything was last active, and why; when it
    decided to shut down; which workers it has told; when each worker last reported."""

    last_activity: float
    reason: str = "autostop (re)started"
    decided: float | None = None
    told: frozenset[int] = frozenset()
    seen: dict[int, float] = field(default_factory=dict)
    told_at: float | None = None  # when the last worker was told

    def to_dict(self, cfg: Config, now: float) -> dict:
        return {"idle_s": cfg.idle_s, "action": cfg.action, "last_activity": self.last_activity,
                "reason": self.reason, "decided": self.decided, "told": sorted(self.told),
                "seen": {str(k): v for k, v in sorted(self.seen.items())},
                "left_s": time_left(self, cfg, now), "now": now}


def time_left(clock: Clock, cfg: Config, now: float) -> float:
    """Seconds until the master decides (0 once it has)."""
    if clock.decided is not None:
        return 0.0
    return max(0.0, clock.last_activity + cfg.idle_s - now)


def observe(clock: Clock, now: float, reasons: list[str], node: int = 0) -> Clock:
    """``reasons`` of ``node`` seen at ``now``: any activity resets the clock (until the
    master has decided: then it is too late). A worker's report is remembered as seen."""
    seen = dict(clock.seen)
    if node != 0:
        seen[node] = now
    if reasons and clock.decided is None:
        label = "" if node == 0 else f"worker-{node}: "
        return replace(clock, last_activity=max(clock.last_activity, now),
                       reason=label + "; ".join(reasons), seen=seen)
    return replace(clock, seen=seen)


def decide(clock: Clock, cfg: Config, now: float) -> Clock:
    """The clock with the decision made once the idle time has passed."""
    if clock.decided is None and now - clock.last_activity >= cfg.idle_s:
        return replace(clock, decided=now)
    return clock


def tell(clock: Clock, node: int, now: float) -> Clock:
    """A worker has been told to shut down (it reported after the decision)."""
    if node in clock.told:
        return clock
    return replace(clock, told=clock.told | {node}, told_at=now)


def master_may_go(clock: Clock, cfg: Config, now: float) -> bool:
    """Whether the master powers itself off now: decided, and every worker told (DRAIN_S
    ago: they go first), or the workers that did not report have had two polls and the
    grace to do so."""
    if clock.decided is None:
        return False
    workers = set(range(1, cfg.nodes))
    if workers <= clock.told:
        return now - (clock.told_at if clock.told_at is not None else clock.decided) >= DRAIN_S
    return now - clock.decided >= 2 * cfg.poll_s + TELL_GRACE_S


def orphaned(last_contact: float, last_activity: float, cfg: Config, now: float) -> bool:
    """A worker that has not reached the master since ``last_contact`` and has been idle
    itself since ``last_activity`` powers itself off when both last long enough."""
    wait = max(float(cfg.idle_s), ORPHAN_MIN_S)
    return now - last_contact >= wait and now - last_activity >= cfg.idle_s


# -- the messages (``link.sign`` signs them) ----------------------------------------------

def report(node: int, reasons: list[str], nonce: str, now: float) -> dict:
    """What a worker sends the master."""
    return {"kind": "report", "node": node, "active": list(reasons), "nonce": nonce,
            "time": now}


def answer(clock: Clock, cfg: Config, nonce: str, now: float) -> dict:
    """What the master answers a report (the worker's nonce echoed: no replay)."""
    return {"kind": "answer", "shutdown": clock.decided is not None, "nonce": nonce,
            "left_s": time_left(clock, cfg, now), "time": now}


def check_report(body: dict, cfg: Config) -> tuple[int, list[str], str]:
    """(node, reasons, nonce) of a verified report; ValueError when it is not one."""
    node = body.get("node")
    active = body.get("active")
    nonce = body.get("nonce")
    if body.get("kind") != "report" or not isinstance(node, int) or isinstance(node, bool) \
            or not 1 <= node < cfg.nodes or not isinstance(active, list) \
            or not isinstance(nonce, str) or not 16 <= len(nonce) <= 64:
        raise ValueError("not a report of a worker of this cluster")
    return node, [str(a)[:200] for a in active[:20]], nonce


def check_answer(body: dict, nonce: str) -> bool:
    """Whether a verified answer to the report with ``nonce`` says shut down."""
    if body.get("kind") != "answer" or body.get("nonce") != nonce:
        raise ValueError("not the answer to this report")
    return body.get("shutdown") is True
