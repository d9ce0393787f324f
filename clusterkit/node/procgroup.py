"""The node's processes of a job as one group (torch elastic's worker group): started in
the job's cgroup, reaped, signalled (the checkpoint signal sparing launchers, schedulers
and servers), and stopped TERM -> grace -> KILL; each one's exit record. Stdlib only,
Python >= 3.8; shipped beside the supervisor (``bundle.SUPERVISOR``).

Files in the job dir, per process: ``<name>.log`` (its output), ``<name>.pid`` ("pid
pgid"), ``<name>.exit`` (its returncode, once it ended); ``exit_code`` reads the last.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

try:  # imported as clusterkit.node.procgroup (the client, tests)
    from . import jobstate
    from .jobfile import JobFile, ProcessEntry
    from .nodefiles import read_json
    from .reaping import Cgroup, Reaper, make_cgroup
except ImportError:  # run from a job dir on a node: its modules lie beside it
    import jobstate
    from jobfile import JobFile, ProcessEntry
    from nodefiles import read_json
    from reaping import Cgroup, Reaper, make_cgroup

P = jobstate.ProcStateName
# Moves the process into the cgroup between fork and exec ($0 is cgroup.procs), so
# nothing it forks can start outside it; the supervisor has no threads but stays safe.
CGROUP_WRAPPER = 'echo $$ > "$0" && exec "$@"'
KILL_EVERY = 0.5  # s: SIGKILL again this often while anything of the job is left


def write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def exit_code(job_dir: str, name: str) -> int | None:
    """The exit record of process ``name`` (its returncode), None while it has none."""
    code = read_json(os.path.join(job_dir, name + ".exit"))
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def checkpoint_signal(name: str | None) -> signal.Signals:
    """The signal that asks the job's processes to checkpoint (job.json's
    ``checkpoint_signal``, default SIGUSR1); ValueError for one this Python lacks."""
    name = str(name or "SIGUSR1")
    try:
        return signal.Signals[name]
    except KeyError:
        raise ValueError(f"bad checkpoint_signal {name!r}") from None


class Proc:
    """One process of the group: started once, ended once (its exit record written)."""

    def __init__(self, spec: ProcessEntry, job_dir: str):
        self.spec, self.job_dir = spec, job_dir
        self.name, self.role = spec.name, spec.role  # the spec's (frozen): never change
        self.popen: subprocess.Popen | None = None
        self.exit: int | None = None
        self.ended: float | None = None  # epoch seconds: what orders failures across nodes

    def file(self, ext: str) -> str:
        return os.path.join(self.job_dir, self.name + "." + ext)

    def start(self, cgroup: Cgroup | None, env: dict) -> None:
        argv = list(self.spec.argv)
        if cgroup is not None:
            argv = ["sh", "-c", CGROUP_WRAPPER, cgroup.procs_file] + argv
        log = os.open(self.file("log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            self.popen = subprocess.Popen(
                argv, cwd=self.spec.cwd or "/", env=env, stdin=subprocess.DEVNULL,
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
        """As the coordinator reports it and state.json holds it."""
        return self.state().to_json()

    def state(self) -> jobstate.ProcessState:
        return jobstate.ProcessState(
            self.name, self.role, self.popen.pid if self.popen else None,
            P.RUNNING if self.exit is None else P.EXITED, self.exit, self.ended)


class ProcessGroup:
    """Every process of the job on this node, and their stop: SIGTERM (after the
    checkpoint signal and its grace, for an interruption), SIGKILL once the grace is
    over, until nothing of the job is left; then the cgroup goes."""

    def __init__(self, job: JobFile, job_dir: str):
        self.job_id, self.node = job.job_id, job.node_index
        self.procs = [Proc(p, job_dir) for p in job.processes]
        self.signal = checkpoint_signal(job.stopping.checkpoint_signal)
        self.grace = job.stopping.grace_seconds  # SIGTERM -> SIGKILL
        self.cgroup: Cgroup | None = None
        self.reaper: Reaper | None = None  # once the stop began
        self.stop_at = 0.0  # monotonic: when SIGTERM went (or goes, after a checkpoint)
        self.term_at: float | None = None  # monotonic: SIGTERM still due then
        self.last_kill = 0.0
        self.gone = False  # nothing of the job is left here

    # -- start and watch
    def make_cgroup(self, name: str) -> Cgroup | None:
        self.cgroup = make_cgroup(name)
        return self.cgroup

    def start(self, env_of) -> None:
        """Every process, each with ``env_of(proc)`` as its whole environment."""
        for p in self.procs:
            p.start(self.cgroup, env_of(p))

    def poll(self) -> list:
        """The processes that ended since the last poll."""
        return [p for p in self.procs if p.poll()]

    def views(self) -> dict:
        return {p.name: p.view() for p in self.procs}

    def states(self) -> tuple:
        return tuple(sorted((p.state() for p in self.procs), key=lambda s: s.name))

    def pgids(self) -> set:
        return {p.popen.pid for p in self.procs if p.popen is not None}

    def reaper_now(self) -> Reaper:
        """Who is left of the job here, as of now."""
        return Reaper(self.job_id, self.cgroup, self.pgids(), self.node)

    # -- signals
    def checkpoint(self, reaper: Reaper | None = None) -> signal.Signals:
        """The checkpoint signal to every process but a launcher (torchrun's agent) and
        MXNet's scheduler and servers, which it would kill."""
        started = [p for p in self.procs if p.popen is not None]
        launchers = {p.popen.pid for p in started if p.role == jobstate.LAUNCHER_ROLE}
        groups = {p.popen.pid for p in started if p.role in jobstate.SPARED_ROLES}
        (reaper or self.reaper_now()).signal_but(self.signal, launchers, frozenset(groups))
        return self.signal

    def checkpointed(self) -> bool:
        """Every process that got the checkpoint signal has exited (saved, presumably):
        the rest (MXNet's servers and scheduler) need not wait out the grace. Not for a
        launcher's job (torchrun): its workers are not this group's processes."""
        told = [p for p in self.procs if p.popen is not None and
                p.role != jobstate.LAUNCHER_ROLE and p.role not in jobstate.SPARED_ROLES]
        if not told or any(p.role == jobstate.LAUNCHER_ROLE for p in self.procs):
            return False
        return all(p.exit is not None for p in told)

    # -- the stop
    def begin_stop(self, checkpoint_for: float | None = None) -> float | None:
        """The stop starts: SIGTERM now, or (``checkpoint_for`` seconds) the checkpoint
        signal now and SIGTERM once they are over; seconds to the SIGTERM (None: sent)."""
        self.reaper = self.reaper_now()
        self.stop_at = time.monotonic()
        if checkpoint_for is None:
            self.reaper.signal(signal.SIGTERM)
            return None
        self.checkpoint(self.reaper)
        self.term_at = self.stop_at = self.stop_at + max(0.0, checkpoint_for)
        return self.term_at - time.monotonic()

    def step_stop(self, now: float) -> bool:
        """One step of the stop begun (``now``: monotonic); True once, when nothing of
        the job is left here (the cgroup removed)."""
        if self.gone or self.reaper is None:
            return False
        running = [p for p in self.procs if p.popen is not None and p.exit is None]
        if not running and not self.reaper.alive():
            if self.cgroup is not None:
                self.cgroup.remove()
            self.gone = True
            return True
        if self.term_at is not None and (now >= self.term_at or self.checkpointed()):
            self.reaper.signal(signal.SIGTERM)
            self.term_at = None
        elif self.term_at is None and now - self.stop_at >= self.grace and \
                now - self.last_kill >= KILL_EVERY:
            self.reaper.kill()
            self.last_kill = now
        return False

    def stopped_for(self, now: float) -> float:
        """Seconds since the stop's SIGTERM (monotonic ``now``)."""
        return now - self.stop_at

    def kill(self) -> None:
        """Last resort: everything of the job here, at once."""
        self.reaper_now().kill()
