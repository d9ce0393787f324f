"""How a node program becomes a daemon: stdlib only, Python >= 3.8.

Shipped beside ``supervisor.py`` into every job dir and beside ``watchdog.py`` into the
autostop dir (``bundle.SUPERVISOR``, ``bundle.WATCHDOG``). The daemon runs in a session of
its own (setsid, double fork: no terminal reaches it, the caller need not reap it), in
``/`` with umask 077, stdin from /dev/null, stdout and stderr appended to its log (0600),
its pid in its pid file (0600). The caller gets the daemon's pid once that file is written
(and, for ``spawn``, once the daemon runs the new program).
"""

from __future__ import annotations

import contextlib
import os
import sys


def daemonize(log_path: str, pid_path: str) -> int:
    """In the caller: the daemon's pid. In the daemon: 0."""
    pid, ready = _detach(log_path, pid_path)
    if not pid:
        os.close(ready)  # the caller returns now
    return pid


def spawn(argv: list, log_path: str, pid_path: str) -> int:
    """``argv`` (a program's path and its arguments) run as a daemon holding none of the
    caller's descriptors beyond stdin, stdout and stderr; its pid."""
    pid, ready = _detach(log_path, pid_path)
    if pid:
        return pid
    try:
        _close_inherited(keep=ready)
        os.execv(argv[0], argv)  # closes `ready` (close-on-exec): the caller returns now
    except OSError:
        os.write(ready, b" failed")  # the caller raises
    os._exit(127)


def _detach(log_path: str, pid_path: str) -> tuple:
    """(the daemon's pid, None) in the caller; (0, the write end of the caller's pipe)
    in the daemon. The log is opened before the fork: a log that cannot be written fails
    the caller, not a daemon nobody watches."""
    out = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.fchmod(out, 0o600)  # a log left from before is made private too
    sys.stdout.flush()
    sys.stderr.flush()
    rfd, wfd = os.pipe()
    child = os.fork()
    if child:
        os.close(wfd)
        os.close(out)
        return _daemon_pid(rfd, child), None
    os.close(rfd)
    try:
        os.setsid()
        if os.fork():
            os._exit(0)
        _become_daemon(out, pid_path)
        os.write(wfd, str(os.getpid()).encode())
    except OSError:
        os._exit(1)
    return 0, wfd


def _daemon_pid(rfd: int, child: int) -> int:
    with os.fdopen(rfd, "rb") as pipe:
        data = pipe.read()  # until every write end is closed: the daemon is ready
    os.waitpid(child, 0)
    if not data.isdigit():
        raise OSError(f"the daemon did not start ({data.decode(errors='replace')!r})")
    return int(data)


def _become_daemon(out: int, pid_path: str) -> None:
    os.chdir("/")
    os.umask(0o077)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(null)
    os.close(out)
    fd = os.open(pid_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")


def _close_inherited(keep: int) -> None:
    """Every descriptor above stderr but ``keep`` (as subprocess's close_fds): one left
    open to an SSH session's pipe would keep the session that started the daemon open."""
    for fd in [int(name) for name in os.listdir("/proc/self/fd")]:
        if fd > 2 and fd != keep:
            with contextlib.suppress(OSError):  # the listing's own, closed already
                os.close(fd)
