"""`clusterkit sandbox start|stop|status` behind the CLI: start the daemon, stop
it and sweep whatever it may have left (even after a crash), report state."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from clusterkit.errors import SandboxError
from clusterkit_sandbox import disks, node, nodeprocs
from clusterkit_sandbox.state import (
    CAPS_FILE,
    DAEMON_MODULE,
    LOG_FILE,
    NODES_FILE,
    RUN_DIR,
    RUN_MARKER,
    STATE_FILE,
    TIMINGS_FILE,
    cleanup_files,
    is_daemon,
    pid_alive,
    read_json_dict,
    running_state,
    state_dir,
    write_json,
)
from clusterkit_sandbox.timings import Timings

# The daemon imports moto and starts its nodes first: a few seconds of CPU on an idle
# machine, many times that on a loaded one (a CI run's suite beside it). It is waited for
# while it lives; a daemon that dies is reported at once.
START_TIMEOUT = 90.0
SECRET_PREFIXES = ("AWS_", "SSH_")  # credentials and agent: the emulator needs none of them


def daemon_env() -> dict[str, str]:
    """The caller's environment minus credentials and the SSH agent: every node can read
    the daemon's ``/proc/PID/environ``, so the daemon must not hold them either."""
    return {k: v for k, v in os.environ.items() if not k.startswith(SECRET_PREFIXES)}


def do_start(directory: str | os.PathLike[str] | None = None,
             timings: Timings | None = None) -> dict[str, Any]:
    """Start the daemon (or return the one already running: SandboxError when it runs
    with other timings than asked). ``timings``: AWS's waits, scaled (None: untimed).
    Returns status."""
    where = state_dir(directory)
    timings = timings or Timings()
    if running_state(where):
        status = do_status(where)
        if timings.on and status["timings"]["scale"] != timings.scale:
            raise SandboxError(f"the sandbox in {where} runs with timings "
                               f"{status['timings']['profile']} at scale "
                               f"{status['timings']['scale']}, not {timings.scale}",
                               "`clusterkit sandbox stop`, then start it with the timings "
                               "you want")
        return {**status, "already_running": True}
    _check_usable(where)
    sweep(where)
    write_json(where / TIMINGS_FILE, timings.to_json())  # the daemon reads it at start
    with open(where / LOG_FILE, "ab") as log:
        proc = subprocess.Popen([sys.executable, "-m", DAEMON_MODULE, str(where)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=log, cwd="/",
                                start_new_session=True, close_fds=True, env=daemon_env())
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        state = read_json_dict(where / STATE_FILE)
        if state.get("pid") == proc.pid and _answers(state["endpoint"]):
            return {**do_status(where), "already_running": False}
        if proc.poll() is not None:
            break
        time.sleep(0.02)
    unanswered = proc.poll() is None
    if unanswered:
        proc.kill()
        proc.wait()
    why = f"no answer in {START_TIMEOUT:.0f} s" if unanswered else "it exited"
    raise SandboxError(f"the sandbox did not start ({why}; state dir {where})"
                       + _log_tail(where / LOG_FILE), f"see {where / LOG_FILE}")


def _log_tail(log: Path, lines: int = 8) -> str:
    """The end of the daemon's log, for the error: what went wrong shows where the user
    looks first (and in a CI log that keeps no files)."""
    try:
        tail = log.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return ""
    return "".join(f"\n  {line}" for line in tail)


def _check_usable(where: Path) -> None:
    """A writable state dir whose run/ (deleted by stop) is the sandbox's own."""
    hint = "pass --dir (or CLUSTERKIT_SANDBOX_DIR) naming a new or empty directory"
    try:
        where.mkdir(parents=True, exist_ok=True)
        (where / LOG_FILE).touch()
    except OSError as exc:
        raise SandboxError(f"cannot use {where} as the sandbox state dir: "
                           f"{exc.strerror or exc}", hint) from exc
    run = where / RUN_DIR
    foreign = run.exists() and not (run / RUN_MARKER).exists() and (
        not run.is_dir() or any(run.iterdir()))
    if foreign:
        raise SandboxError(f"{run} exists and is not the sandbox's; `sandbox stop` would "
                           "delete it", hint)


def _answers(endpoint: str) -> bool:
    parts = urlsplit(endpoint)
    try:
        with socket.create_connection((parts.hostname or "127.0.0.1", parts.port or 80), 0.5):
            return True
    except OSError:
        return False


def do_stop(directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Stop the daemon, then sweep: no process, mount, loop device or temp file left."""
    where = state_dir(directory)
    pid = read_json_dict(where / STATE_FILE).get("pid")
    was_running = is_daemon(pid, where)
    if was_running:
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 20
        while pid_alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)
    swept = sweep(where)
    return {"dir": str(where), "was_running": was_running, **swept}


def sweep(where: Path) -> dict[str, int]:
    """Remove leftovers of a sandbox that died without cleaning up."""
    run = where / RUN_DIR
    if run.exists() and not (run / RUN_MARKER).exists():
        return {"killed": 0, "unmounted": 0, "loops_detached": 0}  # not ours: hands off
    killed = 0
    records = list(read_json_dict(where / NODES_FILE).values())
    records += [read_json_dict(p) for p in run.glob("nodes/*/node.json")]
    for rec in (r for r in records if isinstance(r, dict)):
        victims = nodeprocs.node_pids(None, rec.get("mntns"), rec.get("pidns"))
        killed += len(victims)
        nodeprocs.stop(None, rec.get("mntns"), rec.get("pidns"))
    strays = pids_mentioning(str(run))
    killed += len(strays)
    node.kill_all(strays)
    unmounted = _unmount_under(run)
    loops = disks.loops_under(run)
    for device in loops:
        disks.lodetach(device)
    cleanup_files(where)
    return {"killed": killed, "unmounted": unmounted, "loops_detached": len(loops)}


def pids_mentioning(text: str) -> list[int]:
    """Processes naming ``text`` on their command line or carrying the node marker."""
    marker = f"{node.MARKER_ENV}={text}".encode()
    below = (text + "/").encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
            environ = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if below in cmdline or marker in environ:
            found.append(int(entry))
    return found


def mounts_under(root: Path) -> list[str]:
    """Mount points (in this mount namespace) at or below ``root``."""
    prefix = str(root)
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return points


def _unmount_under(root: Path) -> int:
    points = sorted(mounts_under(root), key=len, reverse=True)
    for point in points:
        subprocess.run(["umount", "-l", point], capture_output=True)
    return len(points)


def do_status(directory: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    where = state_dir(directory)
    state = running_state(where)
    nodes = read_json_dict(where / NODES_FILE)
    return {
        "dir": str(where),
        "running": state is not None,
        "endpoint": state["endpoint"] if state else None,
        "pid": state["pid"] if state else None,
        "nodes": list(nodes.values()) if state else [],
        "capabilities": read_json_dict(where / CAPS_FILE),
        "timings": Timings.from_json(read_json_dict(where / TIMINGS_FILE)
                                     if state else None).to_json(),
    }

