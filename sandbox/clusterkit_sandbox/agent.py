"""The node agent: runs in the emulator's process and reads moto's in-process
EC2 backends every 0.1 s (through ``moto_models``, the one place that does), so each
tagged instance that is ``running`` has a real sshd on its own loopback address, and EBS
state has its loop devices."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterkit_sandbox import console, imds
from clusterkit_sandbox import node as nodes
from clusterkit_sandbox.disks import Disks, VolumeView
from clusterkit_sandbox.images import image_dir
from clusterkit_sandbox.moto_models import (
    InstanceView,
    end_instance,
    read_instances,
    shut_down_by_os,
    unsettled_volume_ids,
)
from clusterkit_sandbox.state import ADDRESSES_FILE, NODES_FILE, read_json, write_json
from clusterkit_sandbox.timed import Recorder
from clusterkit_sandbox.timings import Timings, Wait

log = logging.getLogger("clusterkit_sandbox.agent")
TICK = 0.1
POWER_LOG = "run/power-offs.jsonl"  # one line per node whose OS powered off
BOOT_WORKERS = 8  # first-boot preparations (ssh-keygen, the node's /etc) at once
LISTEN_TIMEOUT = 5.0  # seconds for a booting node's sshd to listen
SSH_NOT_EMULATED = ("SSH node not emulated on this machine (the sandbox needs root and "
                    "/usr/sbin/sshd to run sshd on 127.0.0.N:22)")


@dataclass
class EmulatedNode:
    """An instance the agent runs as a loopback sshd (its address, root, process)."""

    view: InstanceView
    address: str
    root: Path
    host_key: str = ""
    proc: subprocess.Popen | None = None
    ns: str | None = None  # its mount namespace
    pidns: str | None = None  # its PID namespace (nodeprocs)
    state: str = "stopped"
    instance_store: list[str] = field(default_factory=list)
    role: str | None = None  # the instance profile its ROLE_FILE says (as last written)

    def record(self) -> dict[str, Any]:
        return {"instance_id": self.view.instance_id, "cluster": self.view.cluster,
                "address": self.address, "hostname": self.view.hostname,
                "state": self.state, "pid": self.proc.pid if self.proc else None,
                "mntns": self.ns, "pidns": self.pidns, "host_key": self.host_key, "region": self.view.region,
                "instance_store": self.instance_store}


def address_for(index: int, block: int = 0) -> str:
    """2 -> 127.B.0.2 ... 254 -> 127.B.0.254, then 127.B.1.2 ... where B is this
    sandbox's block (0 for the first sandbox on the machine)."""
    third, offset = divmod(index - 2, 253)
    return f"127.{block}.{third}.{offset + 2}"


class Agent:
    def __init__(self, state_dir: Path, caps: dict[str, Any], block: int = 0, *,
                 timings: Timings | None = None, recorder: Recorder | None = None) -> None:
        self.dir = state_dir
        self.timings = timings or Timings()
        self.recorder = recorder or Recorder(None)
        self.running_since: dict[str, float] = {}  # instance id -> when it was seen running
        self.finished: set[str] = set()  # terminated instances whose nodes are gone
        self.block = block
        self.caps = caps
        self.addresses: dict[str, str] = {
            iid: entry["address"] if isinstance(entry, dict) else entry
            for iid, entry in (read_json(state_dir / ADDRESSES_FILE, {}) or {}).items()}
        self.unemulated: dict[str, str] = {}  # instance id -> why it has no SSH node
        self.nodes: dict[str, EmulatedNode] = {}
        self.disks = Disks(self.run_dir, bool(caps.get("loop_devices")))
        for folder in (self.efs_dir, self.power_dir, self.view_dir):
            folder.mkdir(parents=True, exist_ok=True)
        self.stopping = threading.Event()
        self._last: str = ""
        console.install(state_dir, self.console_node)  # GetConsoleOutput shows host keys

    @property
    def run_dir(self) -> Path:
        return self.dir / "run"

    @property
    def efs_dir(self) -> Path:
        return self.run_dir / "efs"

    @property
    def power_dir(self) -> Path:
        """Where a node's OS asks to be powered off."""
        return nodes.power_dir(self.run_dir)

    @property
    def view_dir(self) -> Path:
        """What the nodes read of the sandbox."""
        return nodes.view_dir(self.run_dir)

    def console_node(self, iid: str) -> tuple[str, str, str, int | None] | None:
        """(host key, hostname, cluster, index) of the instance's running node, for its
        console output; None while it has none."""
        node = self.nodes.get(iid)
        if node is None or node.state != "ready" or not node.host_key:
            return None
        return node.host_key, node.view.hostname, node.view.cluster, node.view.index

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.tick()
            except RuntimeError as exc:  # a dict changed under us: next tick
                log.debug("tick skipped: %s", exc)
            except Exception:  # keep the agent alive, the log says why
                log.exception("agent tick failed")
            self.stopping.wait(TICK)

    def tick(self) -> None:
        self._interruptions()
        self._power_offs()
        views, volumes, snapshots = read_instances(self.finished)
        if self.timings.on:
            volumes = self._settled(volumes)
        booting = [node for view in views if (node := self._follow(view)) is not None]
        if booting:
            self._boot_all(booting)
        self._roles(views)
        by_id = {iid: n.root / "disk" / "by-id" for iid, n in self.nodes.items()
                 if n.state in ("ready", "booting")}
        self.disks.sync(volumes, snapshots, by_id)
        self._publish()

    def _interruptions(self) -> None:
        """The instances whose spot interruption notice's time has come go, as on EC2
        (stopped or terminated, as the notice said)."""
        for iid, action in imds.due(self.dir, time.time()).items():
            if end_instance(iid, action):
                log.info("node %s: %s at its interruption notice's time", iid, action)
            imds.forget(self.dir, iid)

    def _power_offs(self) -> None:
        """The nodes whose OS powered off (their shutdown / poweroff shim wrote
        ``run/power/<instance id>``) stop or terminate, as their instance's
        InstanceInitiatedShutdownBehavior says; each is noted in POWER_LOG."""
        for path in self.power_dir.iterdir():
            if path.name.endswith(".tmp"):
                continue
            command = path.read_text(errors="replace").strip()[:200]
            path.unlink(missing_ok=True)
            node = self.nodes.get(path.name)
            if node is None or node.state != "ready":
                log.warning("power-off request for %s, not a running node: ignored", path.name)
                continue
            action = shut_down_by_os(path.name)
            log.info("node %s: `%s` in the node: %s", path.name, command, action)
            with open(self.dir / POWER_LOG, "a") as out:
                out.write(json.dumps({"instance_id": path.name, "cluster": node.view.cluster,
                                      "index": node.view.index, "command": command,
                                      "action": action, "time": time.time()}) + "\n")

    def _roles(self, views: list[InstanceView]) -> None:
        """Each node's instance profile where the node reads it (``nodes.ROLE_FILE``), as
        IMDS serves its role's credentials once it is associated; written when it changes."""
        for view in views:
            node = self.nodes.get(view.instance_id)
            if node is None or node.role == view.role or not (node.root / "conf").is_dir():
                continue
            path = node.root / "conf" / nodes.ROLE_FILE
            if view.role:
                path.write_text(view.role + "\n")
            else:
                path.unlink(missing_ok=True)
            node.role = view.role

    @staticmethod
    def _settled(volumes: list[VolumeView]) -> list[VolumeView]:
        """The timed sandbox's volumes, one still creating or attaching shown unattached:
        its device appears in the node when AWS's wait is over."""
        unsettled = unsettled_volume_ids()
        return [replace(v, instance_id=None) if v.volume_id in unsettled else v
                for v in volumes]

    def _address(self, iid: str) -> str:
        if iid not in self.addresses:
            self.addresses[iid] = address_for(len(self.addresses) + 2, self.block)
            self._write_addresses()
        return self.addresses[iid]

    def _write_addresses(self) -> None:
        """The address hook's map; a node that cannot be emulated here is marked, so
        the hook says "not emulated" instead of SSH timing out on a dead address."""
        table: dict[str, Any] = dict(self.addresses)
        for iid, why in self.unemulated.items():
            table[iid] = {"address": self.addresses[iid], "not_emulated": why}
        write_json(self.dir / ADDRESSES_FILE, table)
        write_json(self.view_dir / ADDRESSES_FILE, table)

    def _reconcile(self, view: InstanceView) -> None:
        """Follow one instance's state, booting its node if it is to boot now."""
        node = self._follow(view)
        if node is not None:
            self._boot_all([node])

    def _follow(self, view: InstanceView) -> EmulatedNode | None:
        """Follow the instance's state; the node when it is to boot now (``tick`` boots
        every such node of a tick together)."""
        node = self.nodes.get(view.instance_id)
        if node is None:
            if view.state == "terminated":
                self.finished.add(view.instance_id)
                return None
            node = EmulatedNode(view, self._address(view.instance_id),
                        self.run_dir / "nodes" / view.instance_id)
            self.nodes[view.instance_id] = node
        node.view = view
        if view.state == "running" and node.state == "stopped":
            return node if self._ssh_due(view.instance_id) else None
        if view.state != "running":
            self.running_since.pop(view.instance_id, None)
        if view.state != "running" and node.state in ("ready", "booting", "failed"):
            self._halt(node)
        if view.state == "terminated" and node.state != "terminated":
            if node.proc is not None:
                self._halt(node)
            shutil.rmtree(node.root, ignore_errors=True)
            node.state = "terminated"
        if view.state == "terminated":
            self.finished.add(view.instance_id)  # for good: not read again
        return None

    def _ssh_due(self, iid: str) -> bool:
        """Whether a running instance's sshd may answer now: at once untimed, else once
        it has been running for the SSH wait (recorded when it is over)."""
        wait = self.timings.wait(Wait.SSH_ANSWERS)
        if wait <= 0:
            return True
        since = self.running_since.setdefault(iid, time.time())
        if time.time() < since + wait:
            return False
        self.recorder.add("wait", Wait.SSH_ANSWERS.value, iid, since, time.time())
        return True

    def _spec(self, node: EmulatedNode) -> nodes.NodeSpec:
        image = image_dir(self.run_dir, node.view.image_id) if node.view.image_id else None
        return nodes.NodeSpec(node.view.instance_id, node.address, node.view.hostname,
                              node.view.public_keys, node.root, self.efs_dir,
                              namespaces=bool(self.caps.get("namespaces")),
                              md=bool(self.caps.get("md_raid")), image=image,
                              package_index=str(self.caps.get("package_index") or ""))

    def _boot_all(self, booting: list[EmulatedNode]) -> None:
        """Boot the nodes that became running, together: first boot's host keys (one
        ssh-keygen each) in parallel, every sshd started, then one wait for them all, so
        64 nodes launched at once are up about as soon as one."""
        if not self.caps.get("ssh_nodes"):
            for node in booting:
                node.state = "not emulated"
                self.unemulated[node.view.instance_id] = SSH_NOT_EMULATED
            self._write_addresses()
            return
        specs = [self._spec(node) for node in booting]
        with ThreadPoolExecutor(max_workers=min(BOOT_WORKERS, len(specs))) as pool:
            host_keys = list(pool.map(nodes.prepare, specs))
        for node, spec, key in zip(booting, specs, host_keys, strict=True):
            node.host_key = key
            self._start(node, spec)
        deadline = time.monotonic() + LISTEN_TIMEOUT
        for node in booting:
            left = max(0.2, deadline - time.monotonic())
            self._settle(node, nodes.wait_listening(node.address, timeout=left))

    def _start(self, node: EmulatedNode, spec: nodes.NodeSpec) -> None:
        try:
            node.instance_store = self.disks.boot_instance_store(
                spec.instance_id, node.view.instance_store_gb, node.root)
        except (subprocess.CalledProcessError, OSError) as exc:
            log.error("instance store for %s failed: %s", spec.instance_id, exc)
        node.proc = nodes.start(spec, node.root / "sshd.log")
        node.state = "booting"

    def _settle(self, node: EmulatedNode, listening: bool) -> None:
        """A booting node is ready once its sshd listens, else failed."""
        iid = node.view.instance_id
        if not listening:
            node.state = "failed"
            log.error("node %s: sshd did not listen, see %s", iid, node.root / "sshd.log")
            return
        assert node.proc is not None
        node.ns = nodes.mount_ns(node.proc.pid)
        node.pidns = nodes.pid_ns(node.proc.pid, children=True) if self.caps.get(
            "namespaces") else None
        node.state = "ready"
        write_json(node.root / "node.json", node.record())  # the sweep's ledger
        log.info("node %s up on %s (%s)", iid, node.address, node.view.hostname)

    def _halt(self, node: EmulatedNode) -> None:
        if node.proc is not None:
            nodes.stop(node.proc.pid, node.ns, node.pidns)
            try:
                node.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                log.error("node %s: boot process did not exit", node.view.instance_id)
        node.proc, node.ns, node.pidns = None, None, None
        self.disks.drop_instance_store(node.root)
        node.instance_store = []
        node.state = "stopped"
        log.info("node %s stopped", node.view.instance_id)

    def _publish(self) -> None:
        records = {iid: n.record() for iid, n in self.nodes.items()}
        text = repr(sorted(records.items()))
        if text != self._last:
            write_json(self.dir / NODES_FILE, records)
            self._last = text

    def shutdown(self) -> None:
        self.stopping.set()
        for node in self.nodes.values():
            if node.state not in ("stopped", "terminated"):
                self._halt(node)
        self.disks.release_all(self.run_dir)
        self._publish()
