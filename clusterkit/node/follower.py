"""Node-side reader of training jobs: stdlib only, Python >= 3.8. The client sends this
file over SSH stdin, after ``jobstate.py`` (``bundle.program``), and runs it as
``python3 - VERB ARGS`` (nothing is installed on the node, and the node always runs the
client's version).

Verbs:
  jobs [ROOT]          one JSON line per job under ROOT/var/lib/clusterkit/jobs: its
                       state.json, refreshed by the job's supervisor while it runs
  follow JOB_DIR [--follow] [--metrics] [--name N]... [--role R]...
                       every line of the selected processes' logs as ``L<name>\\t<line>``;
                       with --follow until the job has ended on this node (and with
                       --metrics each new metric sample as ``M<sample>``, and at the
                       end the job's totals here as ``T<summary.json>``); last line
                       ``S<state.json>``
  prepare [--ports COUNT] [--hosts] [--cd DIR]
                       what `train` needs before a start, as one JSON object: "jobs"
                       (as `jobs` lists them), "home"; with --ports, "ports": COUNT
                       distinct TCP ports free on every interface here (bind test;
                       fewer when fewer are); with --hosts, "hosts" (/etc/hosts);
                       with --cd, "cwd": DIR (~ expanded) made absolute (exit 1 when
                       it is not a directory)
"""

import json
import os
import random
import select
import socket
import struct
import subprocess
import sys
import time

try:  # imported as clusterkit.node.follower (the client, tests)
    from . import jobfile, jobstate, nodestate, paths, wire
    from .nodefiles import options, run_program
    from .samples import SAMPLES, read_summary
except ImportError:  # sent over stdin: bundle.program puts these in sys.modules
    import jobfile
    import jobstate
    import nodestate
    import paths
    import wire
    from nodefiles import options, run_program
    from samples import SAMPLES, read_summary

JOBS = paths.JOBS_DIR
ENDED = jobstate.FINAL
ACTIVE = jobstate.ACTIVE
POLL = 0.05  # at most this often a pass over the logs and the state (a busy job's)
STATE = nodestate.NAME
WATCH_WAIT = 1.0  # with inotify: a pass at least this often (the timeouts below)
STOPPING_WAIT = 3.0  # a failed job still stopping on this node counts as ended after it
MISSING_WAIT = 30.0  # no state.json for this long: the supervisor never started
PORT_RANGE = (20000, 32000)  # below Linux's ephemeral ports (32768-60999)


def refreshed_state(job_dir):
    """state.json, refreshed through the supervisor's `status` verb while the job runs."""
    state = nodestate.read_raw(job_dir)  # passed on as written: the client reads it
    supervisor = os.path.join(job_dir, "supervisor.py")
    if state and state.get("state") in ACTIVE and os.path.exists(supervisor):
        try:
            out = subprocess.run([sys.executable, supervisor, "status", job_dir],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 timeout=20, check=False).stdout
            state = json.loads(out.decode()) or state
        except (OSError, ValueError, subprocess.SubprocessError):
            pass
    return state


def job_states(root):
    base = root + JOBS
    names = sorted(os.listdir(base)) if os.path.isdir(base) else []
    for name in names:
        job_dir = os.path.join(base, name)
        if not name.startswith("j-") or not os.path.isdir(job_dir):
            continue
        state = refreshed_state(job_dir) or {"job_id": name,
                                             "state": jobstate.JobStateName.UNKNOWN.value}
        state["job_id"] = name
        yield state


def jobs(root):
    for state in job_states(root):
        print(json.dumps(state), flush=True)


class Log:
    """One process's log, read as it grows; only whole lines are passed on."""

    def __init__(self, path, name):
        self.path, self.name, self.handle, self.partial = path, name, None, b""

    def pump(self, final=False):
        if self.handle is None:
            try:
                self.handle = open(self.path, "rb")  # noqa: SIM115 (kept open: it grows)
            except OSError:
                return
        data = self.handle.read()
        *lines, self.partial = (self.partial + data).split(b"\n")
        if final and self.partial:
            lines.append(self.partial)
            self.partial = b""
        for line in lines:
            text = line.decode("utf-8", "replace").rstrip("\r")
            sys.stdout.write(f"L{self.name}\t{text}\n")


def selected(job_dir, names, roles):
    try:
        job = jobfile.read(job_dir)
    except wire.WireError as error:  # a job of a newer clusterkit: its state says more
        sys.stderr.write(f"{error}\n")
        job = None
    procs = job.processes if job is not None else ()
    return [Log(os.path.join(job_dir, p.name + ".log"), p.name) for p in procs
            if (not names or p.name in names) and (not roles or p.role in roles)]


def ended(state, since):
    """Whether the job is over on this node (``since``: when it was first seen failed
    while still stopping)."""
    if state is None:
        return False
    if state.get("state") in ENDED:
        return True
    return state.get("failed") is not None and since is not None \
        and time.monotonic() - since > STOPPING_WAIT


class Changes:
    """Waits for a change in the job dir: inotify where the kernel has it (a quiet job
    costs nothing; a new state.json is seen at once, log lines at most every POLL),
    else a POLL sleep. ``clock`` and ``select_fn`` are time.monotonic and select.select,
    given others by the tests (what is waited for, not how long it took, is the point)."""

    IN_MODIFY, IN_CLOSE_WRITE, IN_MOVED_TO, IN_CREATE = 0x2, 0x8, 0x80, 0x100

    def __init__(self, job_dir, clock=None, select_fn=None):
        self.fd, self.last = None, 0.0
        self.clock = clock or time.monotonic
        self.select = select_fn or select.select
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
            mask = self.IN_MODIFY | self.IN_CLOSE_WRITE | self.IN_MOVED_TO | self.IN_CREATE
            if fd >= 0 and libc.inotify_add_watch(fd, job_dir.encode(), mask) >= 0:
                self.fd = fd
            elif fd >= 0:
                os.close(fd)
        except (OSError, AttributeError, ImportError):
            self.fd = None

    def names(self):
        """The names in the pending events (struct inotify_event: wd, mask, cookie,
        len, then len bytes of NUL-padded name)."""
        found = set()
        while True:
            try:
                data = os.read(self.fd, 65536)
            except OSError:  # drained (EAGAIN)
                return found
            offset = 0
            while offset + 16 <= len(data):
                size = struct.unpack_from("iIII", data, offset)[3]
                found.add(data[offset + 16:offset + 16 + size].rstrip(b"\0").decode(
                    "utf-8", "replace"))
                offset += 16 + size

    def wait(self):
        """Until the next pass is due; why: "state" (a new state.json: at once), "logs"
        (other changes: at most one pass per POLL), "quiet" (nothing for WATCH_WAIT),
        "poll" (no inotify: a POLL sleep)."""
        if self.fd is None:
            time.sleep(POLL)
            return "poll"
        due, why = None, "quiet"  # due: when the pass for new log lines is
        while True:
            now = self.clock()
            timeout = WATCH_WAIT if due is None else max(0.0, due - now)
            if not self.select([self.fd], [], [], timeout)[0]:
                break
            if STATE in self.names():
                why = "state"
                break
            if due is None:
                due, why = max(now, self.last + POLL), "logs"
        self.last = self.clock()
        return why


def tell_notices(state, told):
    """The node's spot notices (state.json ``notices``) after the first ``told``, one
    ``N`` line each, as they come; how many are told now."""
    notices = (state or {}).get("notices") or []
    for notice in notices[told:]:
        sys.stdout.write("N" + json.dumps(notice) + "\n")
    sys.stdout.flush()
    return max(told, len(notices))


class MetricsTail:
    """The node's metric samples (the sampler's metrics.jsonl) as they are written, one
    ``M<sample>`` line each, from the end of what was there when following began (a file
    written later, or anew after a rotation, from its start)."""

    def __init__(self, path):
        self.path, self.offset, self.inode, self.partial = path, None, None, b""

    def pump(self):
        try:
            with open(self.path, "rb") as handle:
                inode = os.fstat(handle.fileno()).st_ino
                if self.offset is None:
                    self.offset = handle.seek(0, 2)
                elif inode != self.inode:
                    self.offset, self.partial = 0, b""
                self.inode = inode
                handle.seek(self.offset)
                data = handle.read()
                self.offset += len(data)
        except OSError:  # not written yet, or rotated away: the next file from its start
            self.offset, self.partial = 0, b""
            return
        *lines, self.partial = (self.partial + data).split(b"\n")
        for line in lines:
            if line.strip():
                sys.stdout.write("M" + line.decode("utf-8", "replace") + "\n")


def tell_totals(job_dir):
    """The job's running totals here (summary.json), as a "T" line before the final
    state: `train` makes the job's report from them without asking every node again."""
    try:
        summary = read_summary(job_dir)
    except ValueError:  # a newer record: the client asks with the observer, and says so
        return
    if summary is not None:
        sys.stdout.write("T" + json.dumps(summary.to_json()) + "\n")


def follow(job_dir, keep_following, names, roles, metrics_wanted=False):
    logs = selected(job_dir, names, roles)
    start, failing_since, last_pass = time.monotonic(), None, False
    state, told = None, 0
    changes = Changes(job_dir) if keep_following else None
    metrics = MetricsTail(os.path.join(job_dir, SAMPLES)) \
        if keep_following and metrics_wanted else None
    while True:
        for log in logs:
            log.pump(final=last_pass or not keep_following)
        if metrics is not None:
            metrics.pump()
        sys.stdout.flush()
        if last_pass or not keep_following:
            break
        state = nodestate.read_raw(job_dir)
        told = tell_notices(state, told)
        if state is None and time.monotonic() - start > MISSING_WAIT:
            break
        if state is not None and state.get("failed") is not None and failing_since is None:
            failing_since = time.monotonic()
        last_pass = ended(state, failing_since)
        if not last_pass:
            changes.wait()
    if keep_following:
        tell_totals(job_dir)
    state = nodestate.read_raw(job_dir) or {"state": jobstate.JobStateName.UNKNOWN.value}
    sys.stdout.write("S" + json.dumps(state) + "\n")
    sys.stdout.flush()


def pick_ports(count):
    found = []
    for port in random.sample(range(*PORT_RANGE), 200):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.bind(("", port))
            found.append(port)
        except OSError:
            continue
        finally:
            sock.close()
        if len(found) == count:
            break
    return found


def prepare(args):
    answer = {"jobs": list(job_states("")), "home": os.path.expanduser("~")}
    for count in options(args, "--ports"):
        answer["ports"] = pick_ports(int(count))  # fewer when the node is short of them
    if "--hosts" in args:
        with open("/etc/hosts") as handle:
            answer["hosts"] = handle.read()
    for where in options(args, "--cd"):
        path = os.path.expanduser(where)
        if not os.path.isdir(path):
            sys.stderr.write(f"{where}: no such directory on this node\n")
            return 1
        answer["cwd"] = os.path.abspath(path)
    print(json.dumps(answer), flush=True)
    return 0


def main(argv):
    if argv and argv[0] == "jobs":
        jobs(argv[1] if len(argv) > 1 else "")
        return 0
    if len(argv) >= 2 and argv[0] == "follow":
        follow(argv[1], "--follow" in argv, options(argv, "--name"), options(argv, "--role"),
               "--metrics" in argv)
        return 0
    if argv and argv[0] == "prepare":
        return prepare(argv[1:])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    run_program(main)
