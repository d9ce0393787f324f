"""The sandbox daemon: moto's ThreadedMotoServer on 127.0.0.1 (free port) and the
node agent, in one process. Started by ``clusterkit sandbox start`` as
``python -m clusterkit_sandbox.server STATE_DIR`` in its own session; SIGTERM
stops nodes, releases loop devices and removes ``run/`` and ``state.json``."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from clusterkit_sandbox import (
    capacity,
    client,
    credentials,
    ebs_direct,
    ec2_gaps,
    iam_seed,
    images,
    imds,
    moto_speed,
    netfilter,
    peers,
    pypi,
    spot_prices,
    timed,
    timed_cfn,
    timed_ebs,
    timed_efs,
    timed_iam,
)
from clusterkit_sandbox.node import shared_dir
from clusterkit_sandbox.state import (
    CAPS_FILE,
    LOG_FILE,
    RUN_DIR,
    RUN_MARKER,
    STATE_FILE,
    TIMINGS_FILE,
    cleanup_files,
    read_json,
    write_json,
)
from clusterkit_sandbox.timings import Timings

log = logging.getLogger("clusterkit_sandbox")


def capabilities() -> dict[str, Any]:
    """What this machine lets the sandbox emulate for real."""
    root = os.geteuid() == 0
    filesystems = Path("/proc/filesystems").read_text() if Path("/proc/filesystems").exists() else ""
    caps: dict[str, Any] = {
        "root": root,
        "ssh_nodes": root and Path("/usr/sbin/sshd").exists(),
        "namespaces": root and bool(shutil.which("unshare")) and "overlay" in filesystems,
        "loop_devices": root and Path("/dev/loop-control").exists() and bool(shutil.which("losetup")),
        "md_raid": Path("/proc/mdstat").exists(),
    }
    notes = []
    if not caps["ssh_nodes"]:
        notes.append("SSH nodes: not emulated (needs root and /usr/sbin/sshd to bind 127.0.0.N:22)")
    if not caps["namespaces"]:
        notes.append("node namespaces (own hostname, root fs, /dev/disk): not emulated")
    if not caps["loop_devices"]:
        notes.append("EBS volumes / instance store as loop devices: not emulated")
    if not caps["md_raid"]:
        notes.append("md RAID (mdadm): not emulated: this kernel has no md driver")
    caps["not_emulated"] = notes
    return caps


def claim_block() -> tuple[int, socket.socket]:
    """An address block 127.B.0.0/16 no other running sandbox holds. The claim is an
    abstract unix socket: the kernel drops it when this process dies, no file left."""
    for block in range(255):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(f"\0clusterkit-sandbox-block-{block}")
        except OSError:
            sock.close()
            continue
        return block, sock
    raise RuntimeError("every loopback address block is held by another sandbox")


def _serve(state_dir: Path) -> None:
    from clusterkit_sandbox.agent import Agent
    from clusterkit_sandbox.guard import GuardedMotoServer

    (state_dir / RUN_DIR).mkdir(exist_ok=True)
    (state_dir / RUN_DIR / RUN_MARKER).touch()  # first: stop may delete run/ only if ours
    caps = capabilities()
    write_json(state_dir / CAPS_FILE, caps)
    timings = Timings.from_json(read_json(state_dir / TIMINGS_FILE, None))
    keys = credentials.Keys()  # this start's: the endpoint takes no other
    files = credentials.write(state_dir, keys)
    server = GuardedMotoServer(keys)  # every request checked from the first
    server.start()
    host, port = server.get_host_and_port()
    recorder = install_timings(server, timings, state_dir / RUN_DIR)
    server._server.app = imds.Imds(server._server.app, state_dir, keys,  # unsigned, as EC2's
                                   peers.metadata_callers(state_dir),
                                   netfilter.fence(state_dir))
    server._server.app = pypi.Index(server._server.app,  # the nodes' package index
                                    shared_dir(state_dir / RUN_DIR) / "wheels", timings,
                                    recorder)
    _install_extras()
    iam_seed.install()
    block, _claim = claim_block()
    agent = Agent(state_dir, {**caps, "package_index": f"http://{host}:{port}{pypi.PREFIX}"
                              "simple/"}, block, timings=timings, recorder=recorder)
    ebs_direct.install(agent.disks.image)  # direct-API snapshots become image files
    thread = threading.Thread(target=agent.run, name="node-agent", daemon=True)
    thread.start()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    endpoint = f"http://{host}:{port}"
    client.hand_over(state_dir, endpoint, os.getpid(), timings, files)  # before state.json
    write_json(state_dir / STATE_FILE, {"endpoint": endpoint, "pid": os.getpid(),
                                        "started": time.time(), "dir": str(state_dir),
                                        "address_block": f"127.{block}.0.0/16"})
    log.info("sandbox up: http://%s:%s (timings: %s)", host, port,
             f"aws x {timings.scale}" if timings.on else "none")
    while not stop.wait(1.0):
        pass
    log.info("stopping")
    agent.stopping.set()
    thread.join(timeout=10)
    agent.shutdown()
    server.stop()


def _install_extras() -> None:
    """Teach the in-process emulator what clusterkit's real-AWS paths expect."""
    moto_speed.install()
    ec2_gaps.install()
    capacity.install()  # capacity reservations and Capacity Blocks, which moto lacks
    try:
        spot_prices.install()
    except Exception:  # the endpoint must come up even if price seeding breaks
        log.exception("spot price install failed")


def install_timings(server: Any, timings: Timings, run_dir: Path) -> timed.Recorder:
    """Put the timings into a started ThreadedMotoServer and moto's models; the
    recorder (writing ``run/timeline.jsonl``, also when untimed: the calls are recorded
    all the same, at no wait)."""
    recorder = timed.Recorder(run_dir / timed.TIMELINE_FILE)
    inner = server._server  # werkzeug's server: its ``app`` serves every request
    inner.app = timed.timed_app(inner.app, timings, recorder)
    timed.install_instance_waits(timings, recorder)
    for module in (timed_cfn, timed_ebs, timed_efs, timed_iam):
        module.install(timings, recorder)
    images.install(timings, recorder, run_dir)
    return recorder


def main(argv: list[str]) -> int:
    state_dir = Path(argv[1])
    logging.basicConfig(filename=state_dir / LOG_FILE, level=logging.INFO,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    try:
        _serve(state_dir)
    except Exception:
        log.exception("sandbox daemon failed")
        return 1
    finally:
        cleanup_files(state_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
