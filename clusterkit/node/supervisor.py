#!/usr/bin/env python3
"""clusterkit's per-node job supervisor: stdlib only, Python >= 3.8.

The client copies it with ``supervisor_daemon.py`` (the daemon itself), ``coord.py``, ``reaping.py``,
``jobstate.py`` and ``interruption.py`` (``jobfiles.node_files``) into ``<job dir>/``
and runs ``python3 <job dir>/supervisor.py start|stop|status|wait <job dir>``.
``start`` daemonizes and runs the processes of its job file in a cgroup of the job's own
(``reaping``). The master node's supervisor listens on the coordinator port; the others
connect, report their processes and heartbeat every second (``coord``); the master alone
decides success or failure and tells every node to stop. Nothing here puts a secret on a
command line: env comes from job.json.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import sys
import time

try:  # imported as clusterkit.node.supervisor (the client, tests)
    from . import jobfile, jobstate, nodestate
    from .daemonize import daemonize
    from .jobfile import JobFile
    from .procgroup import checkpoint_signal, exit_code
    from .reaping import Reaper, pid_alive, recorded_cgroup, signal_pid
except ImportError:  # run as a file on a node: its modules lie beside it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # even with -P
    sys.dont_write_bytecode = True  # the job dir holds only what the docs say
    import jobfile
    import jobstate
    import nodestate
    from daemonize import daemonize
    from jobfile import JobFile
    from procgroup import checkpoint_signal, exit_code
    from reaping import Reaper, pid_alive, recorded_cgroup, signal_pid

JOB_ID_RE = jobstate.JOB_ID_RE
S, P = jobstate.JobStateName, jobstate.ProcStateName  # str enums: JSON writes their values
PROC_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
CGROUP_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,200}$")


# ----- the verbs --------------------------------------------------------------------

def load_job(job_dir: str) -> JobFile:
    """job.json, checked: every name in it becomes a file or cgroup name."""
    job = jobfile.read(job_dir)
    if job is None:
        raise ValueError(f"no readable {jobfile.NAME} in {job_dir}")
    if not JOB_ID_RE.match(job.job_id) or \
            os.path.basename(job_dir.rstrip("/")) != job.job_id:
        raise ValueError(f"{jobfile.NAME}'s job_id does not name this job dir")
    if not CGROUP_NAME_RE.match(job.cgroup_name):
        raise ValueError(f"bad cgroup_name {job.cgroup_name!r}")
    names = [p.name for p in job.processes]
    bad = [n for n in names if not PROC_NAME_RE.match(n)]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"bad or repeated process names: {names!r}")
    checkpoint_signal(job.stopping.checkpoint_signal)  # one this Python knows
    return job



def daemon_pid(job_dir: str, job_id: str) -> int | None:
    """The job's live supervisor, checked by its command line (pids get reused)."""
    try:
        with open(os.path.join(job_dir, "supervisor.pid")) as f:
            pid = int(f.read().split()[0])
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        with open(f"/proc/{pid}/stat", "rb") as f:
            zombie = f.read().rsplit(b")", 1)[1].split()[0] == b"Z"
    except (OSError, ValueError, IndexError):
        return None
    ours = b"supervisor.py" in cmdline and job_id.encode() in cmdline
    return pid if ours and not zombie else None


def verb_start(job_dir: str, job: JobFile) -> int:
    if nodestate.read_raw(job_dir) is not None:
        print(f"job {job.job_id} was already started on this node", file=sys.stderr)
        return 1
    nodestate.write(job_dir, nodestate.NodeState(
        job.job_id, job.node_index, S.STARTING, recovery=job.recovery, updated=time.time()))
    pid = daemonize(os.path.join(job_dir, "supervisor.log"),
                    os.path.join(job_dir, "supervisor.pid"))
    if pid:
        print(f"started {pid}")
        return 0
    # the daemon's parts are imported here, in the daemon: `start` returns as soon as it
    # has daemonized (the job dir keeps no bytecode, so each import compiles its module)
    try:
        from .supervisor_daemon import Supervisor
    except ImportError:
        from supervisor_daemon import Supervisor  # type: ignore[no-redef]
    sup = Supervisor(job_dir, job)
    try:
        code = sup.run()
    except BaseException as e:  # noqa: BLE001 - the daemon must record any death
        import traceback
        traceback.print_exc()
        sup.crash(e)
        code = 1
    sys.stdout.flush()
    os._exit(code)


def _wait_gone(reaper: Reaper, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while reaper.alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def verb_stop(job_dir: str, job: JobFile, grace: float | None) -> int:
    """Ask the daemon, then sweep whatever is left ourselves (also when it is dead)."""
    grace = job.stopping.grace_seconds if grace is None else grace
    pid = daemon_pid(job_dir, job.job_id)
    if pid is not None:
        nodestate.write_stop(job_dir, grace)
        signal_pid(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace + job.coordinator.heartbeat_timeout + 5
        while daemon_pid(job_dir, job.job_id) and time.monotonic() < deadline:
            time.sleep(0.05)
    state = nodestate.read(job_dir) or nodestate.NodeState(job.job_id)
    group = recorded_cgroup(state.holder.to_json(), job.cgroup_name)
    reaper = Reaper(job.job_id, group, _pgids(job_dir, job), job.node_index)
    if reaper.alive():
        reaper.signal(signal.SIGTERM)
        if not _wait_gone(reaper, grace):
            reaper.kill()
    gone = _wait_gone(reaper, 5.0)
    if group is not None and gone:
        group.remove()
    if not state.state.final:
        state = dataclasses.replace(state, state=S.STOPPED, updated=time.time(),
                                    reason=state.reason or "stopped on request")
        nodestate.write(job_dir, state)
    print(state.text())
    return 0 if gone else 1


def verb_budget(job_dir: str, job: JobFile, reason: str, checkpoint_for: float) -> int:
    """The job's spending cap is near (the client decides, ``training/budget.py``): ask
    the master's daemon to stop the job as ``budget``, the checkpoint signal first and
    ``checkpoint_for`` seconds to save; returns at once (the job ends on its own)."""
    pid = daemon_pid(job_dir, job.job_id)
    if pid is not None:
        nodestate.write_stop(job_dir, job.stopping.grace_seconds, reason, checkpoint_for)
        signal_pid(pid, signal.SIGTERM)
    print(refreshed_state(job_dir, job).text())
    return 0 if pid is not None else 1


def _pgids(job_dir: str, job: JobFile) -> set:
    found = set()
    for p in job.processes:
        try:
            with open(os.path.join(job_dir, p.name + ".pid")) as f:
                found.add(int(f.read().split()[1]))
        except (OSError, ValueError, IndexError):
            continue
    return found


def refreshed_state(job_dir: str, job: JobFile) -> nodestate.NodeState:
    """state.json with each process's state checked against the node right now."""
    state = nodestate.read(job_dir) or nodestate.NodeState(job.job_id)
    return dataclasses.replace(
        state, processes=tuple(_refreshed(job_dir, p) for p in state.processes),
        supervisor_running=daemon_pid(job_dir, job.job_id) is not None)


def _refreshed(job_dir: str, proc: jobstate.ProcessState) -> jobstate.ProcessState:
    code = exit_code(job_dir, proc.name)
    if code is not None:
        return dataclasses.replace(proc, state=P.EXITED, exit=code)
    if proc.pid and not pid_alive(proc.pid):
        return dataclasses.replace(proc, state=P.GONE)
    return proc


def verb_wait(job_dir: str, job: JobFile, timeout: float | None) -> int:
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        state = refreshed_state(job_dir, job)
        if state.state.final and not state.supervisor_running:
            print(state.text())
            return 0 if state.state == S.SUCCEEDED else 1
        if deadline is not None and time.monotonic() > deadline:
            print(state.text())
            return 124
        time.sleep(0.2)


def main(argv: list) -> int:
    import argparse
    parser = argparse.ArgumentParser(prog="supervisor.py")
    parser.add_argument("verb", choices=("start", "stop", "status", "wait", "budget"))
    parser.add_argument("job_dir")
    parser.add_argument("--grace", type=float)
    parser.add_argument("--timeout", type=float)
    parser.add_argument("--reason", default="the job's spending cap")
    parser.add_argument("--checkpoint", type=float, default=0.0)
    args = parser.parse_args(argv)
    job_dir = os.path.abspath(args.job_dir)
    try:
        job = load_job(job_dir)
    except ValueError as e:
        print(f"supervisor: {e}", file=sys.stderr)
        return 2
    if args.verb == "start":
        return verb_start(job_dir, job)
    if args.verb == "stop":
        return verb_stop(job_dir, job, args.grace)
    if args.verb == "budget":
        return verb_budget(job_dir, job, args.reason, args.checkpoint)
    if args.verb == "wait":
        return verb_wait(job_dir, job, args.timeout)
    print(refreshed_state(job_dir, job).text())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
