"""The supervisor's daemon: this node's processes of a job, run until the job's outcome
is known, then stopped. Shipped beside ``supervisor.py`` (its verbs), which imports it.
Stdlib only, Python >= 3.8.

Split as torch elastic's agent is: the process group (``procgroup``: start in the job's
cgroup, signal, reap, stop, exit records), the watches (``watchers``: interruption
notices, metrics and stalls, GPU health, each behind one ``poll(now)``), the job's result
(``jobstate.Outcome``, decided by the master through ``coord``); the ``Supervisor`` here
keeps the one loop and its decisions, and writes state.json through ``nodestate``.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import time

try:  # imported as clusterkit.node.supervisor_daemon (the client, tests)
    from . import coord, jobstate, nodestate, paths, watchers
    from .jobfile import JobFile
    from .jobstate import Outcome
    from .nodefiles import read_json, write_json
    from .procgroup import ProcessGroup
    from .reaping import scan_proc
    from .sampler import Sampler
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import coord
    import jobstate
    import nodestate
    import paths
    import watchers
    from jobfile import JobFile
    from jobstate import Outcome
    from nodefiles import read_json, write_json
    from procgroup import ProcessGroup
    from reaping import scan_proc
    from sampler import Sampler

__all__ = ["read_json", "write_json"]  # the verbs' (supervisor.py)
JOB_ID_RE = jobstate.JOB_ID_RE
S = jobstate.JobStateName  # a str enum: JSON writes its values
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The libfabric/NCCL settings for EFA that the bootstrap's efa step writes on the node
# (paths.EFA_PROFILE; job.json's "efa_profile" may name another file): every process of
# the job gets them, read from the file, never run.
EFA_PROFILE = paths.EFA_PROFILE
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ----- files ----------------------------------------------------------------------

def profile_env(path: str) -> dict:
    """The settings of a profile of ``export NAME=VALUE`` lines (the node's EFA profile),
    parsed with shlex: {} when the file is missing or unreadable; a line that is anything
    but assignments (a command, bad quoting) is left out. Parsed rather than sourced by a
    shell in front of each process, so the processes start exactly as job.json says (no
    shell between the supervisor and them) and nothing in the file is ever executed."""
    try:
        with open(path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return {}
    env = {}
    for line in text.splitlines():
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        words = words[1:] if words[:1] == ["export"] else words
        pairs = [w.partition("=") for w in words]
        if pairs and all(eq and ENV_NAME_RE.match(name) for name, eq, _ in pairs):
            env.update((name, value) for name, _, value in pairs)
    return env


def process_env(base: dict, extra: dict, job_id: str, node: int,
                profile: dict | None = None) -> dict:
    """The minimal environment (PATH, HOME, LANG), the node's ``profile`` settings
    (``profile_env``: EFA's), then the job's keys, which win (the user's train.env among
    them), nothing else."""
    env = {"PATH": base.get("PATH") or DEFAULT_PATH, "HOME": base.get("HOME") or "/root",
           "LANG": base.get("LANG") or "C.UTF-8"}
    env.update({str(k): str(v) for k, v in (profile or {}).items()})
    env.update({str(k): str(v) for k, v in extra.items()})
    # the last-resort stop finds the processes of this job on this node by these two
    env.update(CLUSTERKIT_JOB_ID=job_id, CLUSTERKIT_NODE_RANK=str(node))
    return env


def mount_device(mount: str, mounts: str) -> str | None:
    """The block device (``nvme1n1``) mounted at ``mount``, from /proc/self/mounts."""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 2 and fields[1] == mount.rstrip("/") and \
                fields[0].startswith("/dev/"):
            return os.path.basename(os.path.realpath(fields[0]))
    return None


def make_sampler(sup: Supervisor) -> Sampler | None:
    """The node's metrics sampler (job.json's ``sampling``; none: not sampled)."""
    conf, group = sup.job.sampling, sup.group
    if conf is None:
        return None
    device = None
    if conf.dataset_mount:
        try:
            with open("/proc/self/mounts") as f:
                device = mount_device(conf.dataset_mount, f.read())
        except OSError:
            pass
    pgids = group.pgids()
    return Sampler(sup.job_dir, cgroup_path=group.cgroup.path if group.cgroup else None,
                   pids_fn=lambda: scan_proc(pgids, group.job_id, group.node),
                   logs=[p.file("log") for p in group.procs], dataset_device=device,
                   interval=float(conf.interval or 2.0),
                   throughput_pattern=conf.throughput_pattern, node=group.node)


# ----- the daemon -------------------------------------------------------------------

def log(msg: str) -> None:
    print(time.strftime("%Y-%m-%dT%H:%M:%S ") + msg, flush=True)


class Supervisor:
    """This node's processes, run until the job's outcome is known, then stopped: one
    loop (``run``) over the coordinator, the process group and the watches."""

    def __init__(self, job_dir: str, job: JobFile):
        self.job_dir, self.job = job_dir, job
        self.group = ProcessGroup(job, job_dir)
        self.coord = coord.Coordinator(job)
        self.state, self.outcome = S.STARTING, None  # outcome: a jobstate.Outcome
        self.watches: list = []  # made once the processes run (``watchers``)
        self.notices: list = []  # what the watches saw, as state.json records it
        self.started: float | None = None  # epoch: when the processes were started here
        self.stalled: dict | None = None  # {"at", "reason"} once the job hung here
        self.stall_stop_at: float | None = None  # monotonic: stop_on_stall's stop
        self.stop_flag = False  # SIGTERM, SIGINT or SIGHUP: stop on request
        self.linked: set = set()  # the nodes supervisor.log last said this one is linked to
        self.sized = 0  # an elastic job's size changes state.json holds

    @property
    def me(self) -> int:
        return self.job.node_index

    def save(self) -> None:
        cgroup = self.group.cgroup
        nodestate.write(self.job_dir, nodestate.NodeState(
            job_id=self.job.job_id, node=self.me, state=self.state,
            processes=self.group.states(), notices=tuple(self.notices),
            interruption=self.coord.interruption, started=self.started,
            recovery=self.job.recovery, stalled=self.stalled,
            holder=nodestate.Holder(cgroup.path if cgroup else None,
                                    cgroup.unit if cgroup else None, os.getpid()),
            updated=time.time(), sizes=tuple(tuple(x) for x in self.coord.sizes),
        ).decided(self.outcome))

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: setattr(self, "stop_flag", True))
        self.wake_on_signals()
        cgroup = self.group.make_cgroup(self.job.cgroup_name)
        log(f"job {self.job.job_id} node {self.me} cgroup {cgroup and cgroup.path}")
        failure = self.coord.listen()
        if failure is not None:
            self.decide(Outcome(S.FAILED, failure))
        if self.outcome is None:
            self.start()
        self.save()
        self.report()
        while not self.finished():
            heard = self.coord.pump(dial=not self.group.gone)
            self.log_links()
            self.log_sizes()
            if heard is not None:
                self.decide(heard)
            self.tick()
        self.state = self.outcome.state
        self.save()
        log(f"final state {self.state}: {self.outcome.reason}")
        return 0

    def start(self) -> None:
        """The processes, then the watches that need them running."""
        profile = self.node_profile()
        self.group.start(lambda p: process_env(os.environ, p.spec.env, self.job.job_id,
                                               self.me, profile))
        self.state, self.started = S.RUNNING, time.time()
        self.watches = watchers.watches_of(self.job, self.job_dir, self.started,
                                           make_sampler(self))

    def node_profile(self) -> dict:
        """The node's EFA settings for every process (job.json's ``efa_profile``)."""
        path = self.job.efa_profile or EFA_PROFILE
        profile = profile_env(path)
        if profile:
            log(f"{path}: {', '.join(sorted(profile))} for every process")
        return profile

    def wake_on_signals(self) -> None:
        """A process that exits (SIGCHLD) or a stop request wakes the loop through a
        pipe at once, instead of at its next tick."""
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the pipe is written
        rfd, wfd = os.pipe()
        os.set_blocking(rfd, False)
        os.set_blocking(wfd, False)
        signal.set_wakeup_fd(wfd)
        self.coord.wake_on(rfd)

    def log_links(self) -> None:
        """Each link to another node that came up or went, in supervisor.log: what shows
        a node that never reached the master (and what tests wait for)."""
        links = set(self.coord.links)
        for node in sorted(links - self.linked):
            log(f"linked to node {node}")
        for node in sorted(self.linked - links):
            log(f"lost the link to node {node}")
        self.linked = links

    def log_sizes(self) -> None:
        """An elastic job's change of size (the master's): logged and in state.json."""
        sizes = self.coord.sizes
        if len(sizes) > self.sized:
            for _, n in sizes[max(self.sized, 1):]:
                log(f"the elastic job has {n} of {self.coord.num_nodes} node(s)")
            self.sized = len(sizes)
            self.save()

    def report(self) -> None:
        self.coord.report(self.group.views())

    # -- decisions and the local stop
    def decide(self, outcome: Outcome) -> None:
        if self.outcome is not None:
            return
        log(f"decided {outcome.state}: {outcome.reason}")
        self.outcome, self.state = outcome, S.STOPPING
        self.coord.broadcast(outcome)
        until = self.coord.checkpoint_until if outcome.state in jobstate.CHECKPOINTED \
            else None
        left = self.group.begin_stop(None if until is None else until - time.time())
        if left is not None:  # checkpoint first; SIGTERM when the grace ends
            log(f"sent {self.group.signal.name} to every process but a launcher, scheduler "
                f"or server; SIGTERM in {left:.0f} s")
        self.save()

    def finished(self) -> bool:
        """Stopped here, and (the master) every node said so or had its grace."""
        if not self.group.gone:
            return False
        return self.coord.all_done() or \
            self.group.stopped_for(time.monotonic()) > self.group.grace + 3

    def tick(self) -> None:
        if self.group.poll():
            self.save()
            self.report()
        now = time.monotonic()
        if self.stop_flag and self.outcome is None and self.coord.master:
            self.on_budget()
        if self.stop_flag and self.outcome is None:
            grace = nodestate.read_stop_grace(self.job_dir)
            self.group.grace = self.group.grace if grace is None else grace
            self.coord.request_stop()
            self.decide(Outcome(S.STOPPED, f"stopped on request on node {self.me}"))
        self.coord.heartbeat(now)
        self.watch()
        if self.stall_stop_at is not None and now >= self.stall_stop_at and \
                self.outcome is None:
            self.decide(Outcome(S.FAILED, self.stalled["reason"] +
                                "; stopped (train.stop_on_stall)"))
        if self.outcome is None:
            verdict = self.coord.verdict(now)
            if verdict is not None:
                self.decide(verdict)
        if self.outcome is not None and self.group.step_stop(now):
            self.coord.send_done()

    def watch(self) -> None:
        """Every watch, while the job runs; each event acted on in turn."""
        for watch in self.watches:
            if self.outcome is not None:
                return
            for event in watch.poll(time.time()):
                log(event.text)
                if event.kind is watchers.EventKind.NOTICE:
                    self.on_notice(event.notice)
                elif event.kind is watchers.EventKind.STALL:
                    self.on_stall(event.text)

    def on_notice(self, notice) -> None:
        """Recorded; one that stops the job goes to the master (which decides)."""
        self.notices.append(notice.to_json())
        self.save()
        outcome = self.coord.notice(notice)
        if outcome is not None:
            self.decide(outcome)

    def on_stall(self, reason: str) -> None:
        """The job hangs here: the checkpoint signal to its processes; with
        stop_on_stall, the job stopped once checkpoint_grace is over."""
        self.stalled = {"at": time.time(), "reason": reason}
        self.group.checkpoint()
        if self.job.sampling is not None and self.job.sampling.stop_on_stall:
            self.stall_stop_at = time.monotonic() + self.job.stopping.checkpoint_grace
        self.save()

    def on_budget(self) -> None:
        """The client's budget verb (the job's spending cap, ``training/budget.py``):
        every node's processes get the checkpoint signal and its grace (0: SIGTERM now),
        and the job ends as ``budget`` with the client's reason (the amount)."""
        asked = nodestate.read_stop_budget(self.job_dir)
        if asked is None:
            return
        reason, checkpoint_for = asked
        if checkpoint_for > 0 and self.coord.checkpoint_until is None:
            self.coord.checkpoint_until = time.time() + checkpoint_for
        self.decide(Outcome(S.BUDGET, reason))

    def crash(self, error: BaseException) -> None:
        """Last resort: nothing of the job may outlive its supervisor silently."""
        self.group.kill()
        self.outcome = Outcome(S.FAILED, f"supervisor crashed: {error!r}")
        self.state = S.FAILED
        self.save()
