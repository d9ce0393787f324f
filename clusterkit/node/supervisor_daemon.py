"""The supervisor's daemon: this node's processes of a job, run until the job's outcome
is known, then stopped; the files of the job dir it reads and writes. Stdlib only,
Python >= 3.8; shipped beside ``supervisor.py`` (its verbs), which imports it.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time

try:  # imported as clusterkit.node.supervisor_daemon (the client, tests)
    from . import coord, interruption, jobstate, paths
    from .gpuwatch import HealthWatch, unfit_reason
    from .nodefiles import read_json, write_json
    from .reaping import Cgroup, Reaper, make_cgroup, scan_proc
    from .sampler import Sampler
    from .stall import StallWatch
    from .totals import Totals
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import coord
    import interruption
    import jobstate
    import paths
    from gpuwatch import HealthWatch, unfit_reason
    from nodefiles import read_json, write_json
    from reaping import Cgroup, Reaper, make_cgroup, scan_proc
    from sampler import Sampler
    from stall import StallWatch
    from totals import Totals

JOB_ID_RE = jobstate.JOB_ID_RE
S, P = jobstate.JobStateName, jobstate.ProcStateName  # str enums: JSON writes their values
PROC_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
CGROUP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Moves the process into the cgroup between fork and exec ($0 is cgroup.procs), so
# nothing it forks can start outside it; the supervisor has no threads but stays safe.
CGROUP_WRAPPER = 'echo $$ > "$0" && exec "$@"'
# The libfabric/NCCL settings for EFA that the bootstrap's efa step writes on the node
# (paths.EFA_PROFILE; job.json's "efa_profile" may name another file): every process of
# the job gets them, read from the file, never run.
EFA_PROFILE = paths.EFA_PROFILE
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# ----- files ----------------------------------------------------------------------

def load_job(job_dir: str) -> dict:
    """job.json, checked: every name in it becomes a file or cgroup name."""
    job = read_json(os.path.join(job_dir, "job.json"))
    if not isinstance(job, dict):
        raise ValueError(f"no readable job.json in {job_dir}")
    if not JOB_ID_RE.match(str(job.get("job_id"))) or \
            os.path.basename(job_dir.rstrip("/")) != job["job_id"]:
        raise ValueError("job.json's job_id does not name this job dir")
    if not CGROUP_NAME_RE.match(str(job.get("cgroup_name"))):
        raise ValueError(f"bad cgroup_name {job.get('cgroup_name')!r}")
    names = [p.get("name") for p in job.get("processes", [])]
    bad = [n for n in names if not PROC_NAME_RE.match(str(n))]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"bad or repeated process names: {names!r}")
    checkpoint_signal(job)  # a signal this Python knows, or ValueError
    return job


def checkpoint_signal(job: dict) -> signal.Signals:
    """The signal that asks the job's processes to checkpoint (job.json's
    ``checkpoint_signal``, default SIGUSR1)."""
    name = str(job.get("checkpoint_signal") or "SIGUSR1")
    try:
        return signal.Signals[name]
    except KeyError:
        raise ValueError(f"bad checkpoint_signal {name!r}") from None


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
    conf = sup.job.get("sampling")
    if not isinstance(conf, dict):
        return None
    device = None
    if conf.get("dataset_mount"):
        try:
            with open("/proc/self/mounts") as f:
                device = mount_device(str(conf["dataset_mount"]), f.read())
        except OSError:
            pass
    pgids = sup.pgids()
    return Sampler(sup.job_dir, cgroup_path=sup.cgroup.path if sup.cgroup else None,
                   pids_fn=lambda: scan_proc(pgids, sup.job_id, sup.me),
                   logs=[p.file("log") for p in sup.procs], dataset_device=device,
                   interval=float(conf.get("interval") or 2.0),
                   throughput_pattern=conf.get("throughput_pattern"), node=sup.me)


# ----- processes --------------------------------------------------------------------

class Proc:
    def __init__(self, spec: dict, job_dir: str):
        self.name, self.role = spec["name"], spec.get("role", "worker")
        self.spec, self.job_dir = spec, job_dir
        self.popen = None
        self.exit = None
        self.ended = None  # epoch seconds: what orders failures across nodes

    def file(self, ext: str) -> str:
        return os.path.join(self.job_dir, self.name + "." + ext)

    def start(self, cgroup: Cgroup | None, env: dict) -> None:
        argv = [str(a) for a in self.spec["argv"]]
        if cgroup is not None:
            argv = ["sh", "-c", CGROUP_WRAPPER, cgroup.procs_file] + argv
        log = os.open(self.file("log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.popen = subprocess.Popen(
                argv, cwd=self.spec.get("cwd") or "/", env=env, stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            write_file(self.file("pid"), f"{self.popen.pid} {self.popen.pid}\n")
        except OSError as e:
            os.write(log, (f"clusterkit: cannot start {self.name}: {e}\n").encode())
            self.finish(127)
        finally:
            os.close(log)

    def poll(self) -> bool:
        """True once, when the process has just ended."""
        if self.exit is not None or self.popen is None or self.popen.poll() is None:
            return False
        self.finish(self.popen.returncode)
        return True

    def finish(self, code: int) -> None:
        self.exit, self.ended = code, time.time()
        write_file(self.file("exit"), f"{code}\n")

    def view(self) -> dict:
        return {"pid": self.popen.pid if self.popen else None, "role": self.role,
                "state": (P.RUNNING if self.exit is None else P.EXITED).value, "exit": self.exit,
                "ended": self.ended}


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


# ----- the daemon -------------------------------------------------------------------

def log(msg: str) -> None:
    print(time.strftime("%Y-%m-%dT%H:%M:%S ") + msg, flush=True)


class Supervisor:
    """This node's processes, run until the job's outcome is known, then stopped."""

    def __init__(self, job_dir: str, job: dict):
        self.job_dir, self.job, self.job_id = job_dir, job, job["job_id"]
        self.me = int(job.get("node_index", 0))
        self.grace = float(job.get("grace_seconds", 10))
        self.procs = [Proc(p, job_dir) for p in job.get("processes", [])]
        self.coord = coord.Coordinator(job)
        self.state, self.outcome, self.cgroup, self.reaper = S.STARTING, None, None, None
        self.stop_at = self.last_kill = 0.0
        self.stop_flag = self.local_done = False
        self.linked: set = set()  # the nodes supervisor.log last said this one is linked to
        # instance metadata, and a Capacity Block's end; neither: no interruption watcher
        self.watcher = interruption.watcher_of(job)
        self.notices: list = []  # what the watcher saw, as state.json records it
        self.said_unavailable = None
        self.term_at = None  # monotonic: an interruption's SIGTERM, after the checkpoint
        self.started = None  # epoch seconds: when the job's processes were started here
        self.sampler = None  # made once the processes run (their cgroup and pids)
        self.totals = Totals()  # the job's running totals here: summary.json, the report's
        self.stall = None  # a StallWatch while the processes run (job.json's sampling)
        self.stalled = None  # {"at", "reason"} once the job hung here
        self.stall_stop_at = None  # monotonic: stop_on_stall's stop, after the grace
        self.sampler_failed = False
        self.health = None  # a HealthWatch while the processes run (sampling.health_every)
        self.gpus_seen = None  # GPUs in the newest sample that listed any

    def save(self) -> None:
        _, reason, failed, others = self.outcome or (self.state, None, None, [])
        write_json(os.path.join(self.job_dir, "state.json"), {
            "job_id": self.job_id, "node": self.me, "state": self.state, "reason": reason,
            "failed": failed, "others": others, "processes": {p.name: p.view() for p in self.procs},
            "notices": self.notices, "interruption": self.coord.interruption,
            "started": self.started, "recovery": self.job.get("recovery") or {},
            "stalled": self.stalled,
            "cgroup": self.cgroup.path if self.cgroup else None,
            "cgroup_unit": self.cgroup.unit if self.cgroup else None,
            "supervisor_pid": os.getpid(), "updated": time.time()})

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, lambda *_: setattr(self, "stop_flag", True))
        self.wake_on_signals()
        self.cgroup = make_cgroup(self.job["cgroup_name"])
        log(f"job {self.job_id} node {self.me} cgroup {self.cgroup and self.cgroup.path}")
        failure = self.coord.listen()
        if failure is not None:
            self.decide(S.FAILED, failure, None, [])
        if self.outcome is None:
            profile = self.node_profile()
            for p in self.procs:
                p.start(self.cgroup, process_env(os.environ, p.spec.get("env") or {},
                                                 self.job_id, self.me, profile))
            self.state, self.started = S.RUNNING, time.time()
            self.sampler = make_sampler(self)
            conf = self.job.get("sampling") or {}
            if conf.get("stall_after"):
                self.stall = StallWatch(float(conf["stall_after"]), self.started)
            if conf.get("health_every"):
                self.health = HealthWatch(int(conf.get("gpus") or 0),
                                          float(conf["health_every"]), started=self.started)
        self.save()
        self.report()
        while not self.finished():
            heard = self.coord.pump(dial=not self.local_done)
            self.log_links()
            if heard is not None:
                self.decide(*heard)
            self.tick()
        self.state = self.outcome[0]
        self.save()
        log(f"final state {self.state}: {self.outcome[1]}")
        return 0

    def node_profile(self) -> dict:
        """The node's EFA settings for every process (job.json's ``efa_profile``)."""
        path = str(self.job.get("efa_profile") or EFA_PROFILE)
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

    def report(self) -> None:
        self.coord.report({p.name: p.view() for p in self.procs})

    # -- decisions and the local stop
    def decide(self, state: str, reason: str, failed: dict | None, others: list) -> None:
        if self.outcome is not None:
            return
        log(f"decided {state}: {reason}")
        self.outcome, self.state = (state, reason, failed, others), S.STOPPING
        self.coord.broadcast(self.outcome)
        self.reaper = Reaper(self.job_id, self.cgroup, self.pgids(), self.me)
        self.stop_at = time.monotonic()
        until = self.coord.checkpoint_until if state == S.INTERRUPTED else None
        if until is None:
            self.reaper.signal(signal.SIGTERM)
        else:  # checkpoint first; SIGTERM when the grace ends, SIGKILL after the stop's
            sig = self.checkpoint_signal(self.reaper)
            self.term_at = self.stop_at = self.stop_at + max(0.0, until - time.time())
            log(f"sent {sig.name} to every process but a launcher, scheduler or server; "
                f"SIGTERM in "
                f"{self.term_at - time.monotonic():.0f} s")
        self.save()

    def step_stop(self, now: float) -> None:
        if self.local_done:
            return
        running = [p for p in self.procs if p.popen is not None and p.exit is None]
        if not running and not self.reaper.alive():
            if self.cgroup is not None:
                self.cgroup.remove()
            self.local_done = True
            self.coord.send_done()
        elif self.term_at is not None and (now >= self.term_at or self.checkpointed()):
            self.reaper.signal(signal.SIGTERM)
            self.term_at = None
        elif self.term_at is None and now - self.stop_at >= self.grace and \
                now - self.last_kill >= 0.5:
            self.reaper.kill()
            self.last_kill = now

    def checkpointed(self) -> bool:
        """Every process that got the checkpoint signal has exited (saved, presumably):
        the rest (MXNet's servers and scheduler) need not wait out the grace. Not for a
        launcher's job (torchrun): its workers are not this daemon's processes."""
        told = [p for p in self.procs if p.popen is not None and
                p.role != jobstate.LAUNCHER_ROLE and p.role not in jobstate.SPARED_ROLES]
        if not told or any(p.role == jobstate.LAUNCHER_ROLE for p in self.procs):
            return False
        return all(p.exit is not None for p in told)

    def finished(self) -> bool:
        """Stopped here, and (the master) every node said so or had its grace."""
        if not self.local_done:
            return False
        return self.coord.all_done() or time.monotonic() - self.stop_at > self.grace + 3

    def tick(self) -> None:
        if [p for p in self.procs if p.poll()]:
            self.save()
            self.report()
        now = time.monotonic()
        if self.stop_flag and self.outcome is None:
            grace = (read_json(os.path.join(self.job_dir, "stop.json")) or {}).get("grace")
            self.grace = self.grace if grace is None else float(grace)
            self.coord.request_stop()
            self.decide(S.STOPPED, f"stopped on request on node {self.me}", None, [])
        self.coord.heartbeat(now)
        self.watch()
        self.sample()
        self.watch_health()
        if self.stall_stop_at is not None and now >= self.stall_stop_at and \
                self.outcome is None:
            self.decide(S.FAILED, self.stalled["reason"] + "; stopped (train.stop_on_stall)",
                        None, [])
        if self.outcome is None:
            verdict = self.coord.verdict(now)
            if verdict is not None:
                self.decide(*verdict)
        if self.outcome is not None:
            self.step_stop(now)

    def sample(self) -> None:
        """A metrics sample while the processes run; a sampler that fails is logged
        once and left off: metrics never take the job down."""
        if self.sampler is None or self.sampler_failed or self.outcome is not None:
            return
        try:
            written = self.sampler.step(time.time())
            if written is not None:
                self.totals.add(written)
                self.gpus_seen = len(written["gpus"]) if written.get("gpus") else self.gpus_seen
                write_json(os.path.join(self.job_dir, "summary.json"), self.totals.to_json())
                if self.stall is not None and self.stall.update(written):
                    self.on_stall()
        except Exception as error:  # noqa: BLE001 (any: the job goes on without metrics)
            self.sampler_failed = True
            log(f"metrics sampler stopped: {error!r}")

    def on_stall(self) -> None:
        """The job hangs here: the checkpoint signal to its processes; with
        stop_on_stall, the job stopped once checkpoint_grace is over."""
        reason = self.stall.reason(self.me)
        log(reason)
        self.stalled = {"at": time.time(), "reason": reason}
        self.checkpoint_signal(Reaper(self.job_id, self.cgroup, self.pgids(), self.me))
        if (self.job.get("sampling") or {}).get("stop_on_stall"):
            self.stall_stop_at = time.monotonic() + float(self.job.get("checkpoint_grace", 90))
        self.save()

    def watch_health(self) -> None:
        """This node's GPUs, every ``health_every`` s: unfit ones (``gpuwatch``) are
        reported like a spot interruption notice, so the job checkpoints and stops and
        the node is replaced like a reclaimed one."""
        if self.health is None or self.outcome is not None:
            return
        now = time.time()
        fatal = self.health.check(now, self.gpus_seen)
        if not fatal:
            return
        notice = interruption.Notice(interruption.NoticeKind.UNFIT, now, "replace",
                                     unfit_reason(fatal))
        log(f"GPUs unfit: {notice.reason}")
        self.notices.append(notice.to_json())
        self.save()
        outcome = self.coord.notice(notice)
        if outcome is not None:
            self.decide(*outcome)

    def pgids(self) -> set:
        return {p.popen.pid for p in self.procs if p.popen is not None}

    def checkpoint_signal(self, reaper: Reaper) -> signal.Signals:
        """The checkpoint signal to every process but a launcher (torchrun's agent) and
        MXNet's scheduler and servers, which it would kill."""
        sig = checkpoint_signal(self.job)
        started = [p for p in self.procs if p.popen is not None]
        launchers = {p.popen.pid for p in started if p.role == jobstate.LAUNCHER_ROLE}
        groups = {p.popen.pid for p in started if p.role in jobstate.SPARED_ROLES}
        reaper.signal_but(sig, launchers, frozenset(groups))
        return sig

    def watch(self) -> None:
        """The instance metadata, every ``interruption.POLL`` s: an interruption notice
        makes the job interrupted (the master decides; a node tells it)."""
        if self.watcher is None or self.outcome is not None:
            return
        for notice in self.watcher.check():
            log(f"{notice.kind.value} notice: {notice.to_json()}")
            self.notices.append(notice.to_json())
            self.save()
            if notice.kind is interruption.NoticeKind.INTERRUPTION:
                outcome = self.coord.notice(notice)
                if outcome is not None:
                    self.decide(*outcome)
        if self.watcher.unavailable != self.said_unavailable:
            self.said_unavailable = self.watcher.unavailable
            log(f"interruption watcher: {self.said_unavailable or 'metadata readable again'}")

    def crash(self, error: BaseException) -> None:
        """Last resort: nothing of the job may outlive its supervisor silently."""
        Reaper(self.job_id, self.cgroup, self.pgids(), self.me).kill()
        self.outcome = (S.FAILED, f"supervisor crashed: {error!r}", None, [])
        self.state = S.FAILED
        self.save()
