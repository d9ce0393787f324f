#!/usr/bin/env python3
"""clusterkit's autostop watchdog: stdlib only, Python >= 3.8, run as root on every node.

The client ships it with ``autostop_policy.py``, ``nodefiles.py`` and ``paths.py``
(``bundle.WATCHDOG``) into ``paths.AUTOSTOP_DIR`` and runs
``python3 watchdog.py ensure NEW_CONFIG`` (the config, with its token, came over SSH
stdin: never on a command line). ``ensure`` puts the config in place
(``paths.AUTOSTOP_CONFIG``, 0600) and (re)starts the detached daemon when the
config changed or no daemon runs; ``off`` stops it and removes the config; ``status``
prints the master's clock (``paths.AUTOSTOP_STATE``) as JSON.

The daemon: every node looks at itself (jobs whose supervisor lives, SSH sessions with a
terminal in its own mount namespace); workers report to the master's watchdog over TCP
in messages signed with the token; the master keeps the clock, decides, answers each
worker "shut down" (workers first) and then powers itself off, as a person would:
``shutdown -h now``. The instance then stops or terminates, as its
InstanceInitiatedShutdownBehavior says.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import socketserver
import subprocess
import sys
import threading
import time

try:  # imported as clusterkit.node.watchdog (the client, tests)
    from . import autostop_policy as policy
    from . import nodestate, wire
    from . import paths as node_paths
    from .daemonize import spawn
    from .link import sign, verify
    from .nodefiles import read_json, write_json
except ImportError:  # run as a file on a node: its modules lie beside it
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    sys.dont_write_bytecode = True
    import autostop_policy as policy  # type: ignore[no-redef]
    import nodestate  # type: ignore[no-redef]
    import paths as node_paths  # type: ignore[no-redef]
    import wire  # type: ignore[no-redef]
    from daemonize import spawn  # type: ignore[no-redef]
    from link import sign, verify  # type: ignore[no-redef]
    from nodefiles import read_json, write_json  # type: ignore[no-redef]

ROOT_ENV = node_paths.ROOT_ENV  # prefixes every path (tests); set: the power-off is recorded
TICK = 1.0
STATE_EVERY = 5.0  # the master writes its clock at least this often
POWER_OFF = ("shutdown", "-h", "now")  # as on any Ubuntu node
NODE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
MAX_LINE = 8192


def base() -> str:
    return _rooted(node_paths.STATE_DIR)


def _rooted(path: str) -> str:
    return node_paths.under(os.environ.get(ROOT_ENV, ""), path)


def paths() -> dict:
    d = _rooted(node_paths.AUTOSTOP_DIR)
    return {"config": _rooted(node_paths.AUTOSTOP_CONFIG),
            "state": _rooted(node_paths.AUTOSTOP_STATE), "dir": d,
            "pid": f"{d}/watchdog.pid", "log": f"{d}/watchdog.log",
            "jobs": _rooted(node_paths.JOBS_DIR)}


def log(msg: str) -> None:
    print(time.strftime("%Y-%m-%dT%H:%M:%S ") + msg, flush=True)


# ----- what this node is doing ------------------------------------------------------------

def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _alive_with(pid: int, *needles: bytes) -> bool:
    cmdline = _read(f"/proc/{pid}/cmdline")
    stat = _read(f"/proc/{pid}/stat")
    zombie = stat.rsplit(b")", 1)[-1].split()[:1] == [b"Z"]
    return bool(cmdline) and not zombie and all(n in cmdline for n in needles)


def jobs_now(jobs_dir: str) -> list:
    """(job id, state, supervisor alive) of every job dir on this node."""
    found = []
    try:
        names = sorted(os.listdir(jobs_dir))
    except OSError:
        return found
    for name in names:
        d = os.path.join(jobs_dir, name)
        try:
            state = nodestate.read(d)
            said = state.state.value if state is not None else None
        except wire.WireError:  # a newer job's (this watchdog came with an older `up`):
            said = "unreadable"  # counted while its supervisor lives (below)
        if said is None:
            continue
        try:
            pid = int(_read(os.path.join(d, "supervisor.pid")).split()[0])
        except (ValueError, IndexError):
            pid = 0
        alive = pid > 0 and _alive_with(pid, b"supervisor.py", name.encode())
        if said == "unreadable" and alive:
            said = nodestate.JobStateName.RUNNING.value
        found.append((name, said, alive))
    return found


def sessions_now() -> list:
    """``user@pts/N`` of the SSH sessions with a terminal whose sshd lives in this
    process's mount namespace: this node's own (sandbox nodes share one kernel)."""
    try:
        mine = os.readlink("/proc/self/ns/mnt")
    except OSError:
        mine = None
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        cmdline = _read(f"/proc/{entry}/cmdline")
        if not cmdline.startswith(b"sshd"):
            continue
        tty = policy.session_tty(cmdline.decode("utf-8", "replace"))
        try:
            same = os.readlink(f"/proc/{entry}/ns/mnt") == mine
        except OSError:
            same = False
        if tty and same:
            found.append(tty)
    return found


def power_off() -> int:
    """``shutdown -h now``, as on any Ubuntu node (the sandbox's node has a shim of its
    own). Under CLUSTERKIT_ROOT (tests) it is only recorded there, never run."""
    if os.environ.get(ROOT_ENV):
        with open(os.path.join(base(), "poweroff-requested"), "a") as f:
            f.write(" ".join(POWER_OFF) + "\n")
        return 0
    env = {"PATH": NODE_PATH, "LANG": "C.UTF-8"}
    return subprocess.call(list(POWER_OFF), env=env, stdin=subprocess.DEVNULL)


# ----- the daemon -------------------------------------------------------------------------

class Watchdog:
    """One node's watchdog. ``probe`` (reasons this node is active), ``power`` (the
    power-off) and ``clock`` are injected by tests."""

    def __init__(self, cfg: policy.Config, *, probe=None, power=power_off, clock=time.time,
                 state_path: str | None = None) -> None:
        self.cfg, self.power, self.now = cfg, power, clock
        self.probe = probe or (lambda: policy.activity(jobs_now(paths()["jobs"]),
                                                       sessions_now()))
        self.state_path = state_path or paths()["state"]
        self.lock = threading.Lock()
        self.clock = self._resumed(policy.Clock(last_activity=clock()))
        self.last_contact = self.last_local = clock()
        self.written = 0.0
        self.stopping = threading.Event()
        self.server: socketserver.BaseServer | None = None

    def _resumed(self, fresh: policy.Clock) -> policy.Clock:
        """The clock of the daemon this one replaces (same setting, written moments ago):
        a re-install keeps counting; after a reboot or a new setting it starts again."""
        old = read_json(self.state_path)
        if not isinstance(old, dict) or old.get("decided") is not None:
            return fresh
        same = (old.get("idle_s"), old.get("action")) == (self.cfg.idle_s, self.cfg.action)
        recent = fresh.last_activity - float(old.get("now") or 0) <= 2 * self.cfg.poll_s + 60
        last = old.get("last_activity")
        if same and recent and isinstance(last, (int, float)):
            return policy.Clock(last_activity=float(last), reason=str(old.get("reason")))
        return fresh

    # -- master --
    def master_tick(self) -> bool:
        """One tick of the master; True once it has powered off."""
        now, reasons = self.now(), self.probe()
        with self.lock:
            before = self.clock.decided
            self.clock = policy.decide(policy.observe(self.clock, now, reasons), self.cfg, now)
            go = policy.master_may_go(self.clock, self.cfg, now)
        if before is None and self.clock.decided is not None:
            log(f"idle for {policy.format_duration(self.cfg.idle_s)}: shutting the cluster "
                f"down ({self.cfg.action}), workers first")
        self.write_state(now, force=go or before != self.clock.decided)
        if go:
            log(f"workers told: {sorted(self.clock.told) or 'none'}; powering off the master")
            return self.go()
        return False

    def handle(self, line: bytes) -> bytes | None:
        """A worker's signed report -> the signed answer (None: refused)."""
        now = self.now()
        try:
            body = verify(self.cfg.token, line, now)
            node, reasons, nonce = policy.check_report(body, self.cfg)
        except ValueError as e:
            log(f"refused a message: {e}")
            return None
        with self.lock:
            self.clock = policy.decide(policy.observe(self.clock, now, reasons, node),
                                       self.cfg, now)
            if self.clock.decided is not None:
                self.clock = policy.tell(self.clock, node, now)
            reply = policy.answer(self.clock, self.cfg, nonce, now)
        return sign(self.cfg.token, reply)

    def write_state(self, now: float, force: bool = False) -> None:
        if not force and now - self.written < STATE_EVERY:
            return
        with self.lock:
            data = self.clock.to_dict(self.cfg, now)
        data["pid"] = os.getpid()
        write_json(self.state_path, data, 0o644)  # no secret in it: `status` reads it
        self.written = now

    # -- worker --
    def worker_tick(self, ask=None) -> bool:
        """One report to the master; True once this worker has powered off."""
        now, reasons = self.now(), self.probe()
        if reasons:
            self.last_local = now
        try:
            shutdown = (ask or self.ask)(reasons, now)
            self.last_contact = now
        except (OSError, ValueError) as e:
            shutdown = False
            if policy.orphaned(self.last_contact, self.last_local, self.cfg, now):
                log(f"master unreachable since {time.ctime(self.last_contact)} ({e}) and "
                    "idle here: powering off")
                return self.go()
        if shutdown:
            log("the master says the cluster is idle: powering off")
            return self.go()
        return False

    def ask(self, reasons: list, now: float) -> bool:
        nonce = secrets.token_hex(16)
        message = sign(self.cfg.token, policy.report(self.cfg.node, reasons, nonce, now))
        with socket.create_connection((self.cfg.master, self.cfg.port), timeout=5) as sock:
            sock.sendall(message)
            reply = sock.makefile("rb").readline(MAX_LINE)
        return policy.check_answer(verify(self.cfg.token, reply, self.now()), nonce)

    def go(self) -> bool:
        code = self.power()
        if code != 0:
            log(f"{' '.join(POWER_OFF)} exited {code}; trying again in 30 s")
            self.stopping.wait(30)
            return False
        return True

    # -- the loop --
    def serve(self) -> None:
        """The master's listener, on its in-cluster address (retried until it binds)."""
        dog = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = 5

            def handle(self) -> None:
                reply = dog.handle(self.rfile.readline(MAX_LINE))
                if reply:
                    self.wfile.write(reply)

        class Server(socketserver.ThreadingTCPServer):
            allow_reuse_address = True
            daemon_threads = True

        while not self.stopping.is_set():
            try:
                self.server = Server((self.cfg.master, self.cfg.port), Handler)
                break
            except OSError as e:
                log(f"cannot listen on {self.cfg.master}:{self.cfg.port}: {e}; retrying")
                self.stopping.wait(self.cfg.poll_s)
        if self.server is not None:
            self.server.serve_forever(poll_interval=0.5)

    def run(self) -> int:
        log(f"watching: idle {policy.format_duration(self.cfg.idle_s)}, then "
            f"{self.cfg.action}; node {self.cfg.node} of {self.cfg.nodes}")
        if self.cfg.is_master:
            threading.Thread(target=self.serve, daemon=True).start()
        period = TICK if self.cfg.is_master else self.cfg.poll_s
        while not self.stopping.is_set():
            try:
                if self.master_tick() if self.cfg.is_master else self.worker_tick():
                    break
            except Exception as e:  # noqa: BLE001 - the watchdog must keep watching
                log(f"tick failed: {type(e).__name__}: {e}")
            self.stopping.wait(period)
        if self.server is not None:
            self.server.shutdown()
        return 0


# ----- the verbs --------------------------------------------------------------------------

def daemon_pid() -> int | None:
    try:
        pid = int(_read(paths()["pid"]).split()[0])
    except (ValueError, IndexError):
        return None
    return pid if _alive_with(pid, b"watchdog.py", b"run") else None


def stop_daemon(pid: int | None) -> None:
    if pid is None:
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 5
    while daemon_pid() == pid and time.monotonic() < deadline:
        time.sleep(0.05)


def start_daemon() -> int:
    """The daemon (``watchdog.py run``: its command line is how it is found), detached,
    logging to watchdog.log; its pid."""
    p = paths()
    return spawn([sys.executable, os.path.abspath(__file__), "run"], p["log"], p["pid"])


def verb_ensure(new_path: str) -> int:
    """Put the config at ``new_path`` in place; (re)start the daemon when it changed or
    none runs. Prints what it did, as JSON."""
    p = paths()
    new = read_json(new_path)
    try:
        cfg = policy.config_from(new)
    except ValueError as e:
        print(json.dumps({"error": str(e)}))
        return 2
    pid = daemon_pid()
    if new == read_json(p["config"]) and pid is not None:
        os.remove(new_path)
        print(json.dumps({"changed": False, "pid": pid, "setting": cfg.setting()}))
        return 0
    os.chmod(new_path, 0o600)
    os.replace(new_path, p["config"])
    stop_daemon(pid)
    print(json.dumps({"changed": True, "pid": start_daemon(), "setting": cfg.setting()}))
    return 0


def verb_off() -> int:
    p = paths()
    stop_daemon(daemon_pid())
    was = os.path.exists(p["config"])
    for path in (p["config"], p["state"], p["pid"]):
        if os.path.exists(path):
            os.remove(path)
    print(json.dumps({"off": True, "was_on": was}))
    return 0


def verb_status() -> int:
    """The master's clock as the daemon last wrote it, with this node's time now."""
    state = read_json(paths()["state"])
    print(json.dumps({"running": daemon_pid() is not None, "now": time.time(),
                      "state": state if isinstance(state, dict) else None}, sort_keys=True))
    return 0


def verb_run() -> int:
    cfg = policy.config_from(read_json(paths()["config"]))
    dog = Watchdog(cfg)
    signal.signal(signal.SIGTERM, lambda *_: dog.stopping.set())
    return dog.run()


def main(argv: list) -> int:
    os.umask(0o077)
    verb = argv[0] if argv else ""
    if verb == "ensure" and len(argv) == 2:
        return verb_ensure(argv[1])
    if verb in ("off", "status", "run") and len(argv) == 1:
        return {"off": verb_off, "status": verb_status, "run": verb_run}[verb]()
    print("usage: watchdog.py ensure CONFIG | off | status | run", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
