"""`clusterkit top NAME --prometheus [HOST:]PORT`: every node's newest sample served as
Prometheus metrics. ``Exporter.refresh`` reads a frame (``top.Top``, at the sampler's
pace) and keeps a ``Snapshot``; a custom collector (``SnapshotCollector``) maps the
snapshot it finds to metric families on each scrape (``training/prometheus.py``), in a
registry of its own served by ``prometheus_client``'s HTTP server (no global metric
objects, no process metrics of this command).

Without ``--job`` the exporter follows the cluster: when a newer job starts it moves to
it. Each node's start of the job (its ``state.json``, for the job's cost) is read with
the first frame and again every ``JOBS_EVERY`` s, with that check for a newer job."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from clusterkit.cluster.jobs import nodejobs
from clusterkit.cluster.jobs.top import Top, TopFrame
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.netguard import is_loopback, sandbox_mode
from clusterkit.training import prometheus
from clusterkit.training.prometheus import NodeView, Snapshot

OPTION = "--prometheus"
LISTEN_HINT = f"e.g. {OPTION} 9101 (on 127.0.0.1) or {OPTION} 0.0.0.0:9101 (every interface)"


def listen_address(text: str) -> tuple[str, int]:
    """``[HOST:]PORT`` -> (host, port), 127.0.0.1 when no host is given; exit 2 for a
    malformed one, and for a host off loopback in sandbox mode (its net guard)."""
    try:
        host, port = prometheus.parse_listen(text)
    except ValueError as exc:
        raise UsageError(f"{OPTION} {text}: {exc}", LISTEN_HINT) from exc
    if sandbox_mode() and not is_loopback(host):
        raise UsageError(
            f"{OPTION} {text}: sandbox mode serves on loopback only (127.0.0.0/8), "
            f"not on {host}",
            f"{OPTION} 127.0.0.1:{port}, or leave sandbox mode (no --sandbox, "
            "CLUSTERKIT_SANDBOX unset) to serve on another address")
    return host, port


@dataclass
class Exporter:
    """A job's frames (``top``) and the snapshot the scrapes read."""

    top: Top
    follow: bool  # no --job given: move to the cluster's newest job when one starts
    clock: Callable[[], float] = time.time
    snapshot: Snapshot | None = None
    started: dict[int, float] = field(default_factory=dict)  # node -> the job's start
    jobs_at: float = float("-inf")

    JOBS_EVERY = 60.0  # seconds between two reads of the nodes' job states

    def refresh(self) -> TopFrame:
        """A frame of the job (the newest one, when following), kept for the scrapes."""
        frame = self.top.frame()
        if self.clock() - self.jobs_at >= self.JOBS_EVERY:
            self.jobs_at = self.clock()
            if self.read_jobs():  # a newer job: its first frame
                frame = self.top.frame()
        self.snapshot = snapshot_of(self.top, frame, self.started)
        return frame

    def read_jobs(self) -> bool:
        """Each node's start of the job; True when it moved to a newer job."""
        jc = self.top.jc
        try:
            by_node = nodejobs.node_jobs(jc)
        except ClusterkitError:  # a node did not answer: asked again JOBS_EVERY on
            return False
        newest = nodejobs.latest_job(by_node)
        moved = self.follow and newest is not None and newest > self.top.job_id
        if moved:
            self.top, self.started = Top(jc, newest, clock=self.top.clock), {}
        for target in jc.targets:
            state = nodejobs.job_on(by_node.get(target.hop.label, []), self.top.job_id)
            if state is not None and state.started is not None:
                self.started[target.node.index or 0] = state.started
        return bool(moved)


def snapshot_of(top: Top, frame: TopFrame, started: dict[int, float]) -> Snapshot:
    """Every node of ``frame`` with its window of samples, type, price and start."""
    nodes = {n.index or 0: n for n in top.jc.nodes}
    views = []
    for row in frame.rows:
        node = nodes.get(row.index)
        views.append(NodeView(
            row.index, row.node, node.instance_type if node else "",
            node.price if node else None, started.get(row.index),
            tuple(top.windows.get(row.index, ())), row.error))
    return Snapshot(frame.cluster, frame.job_id, tuple(views), frame.findings, frame.budget)


class SnapshotCollector(Collector):
    """What a scrape reads: the exporter's newest snapshot, mapped then."""

    def __init__(self, exporter: Exporter):
        self.exporter = exporter

    def collect(self) -> Iterable[Metric]:
        return prometheus.families(self.exporter.snapshot)


def serve(exporter: Exporter, host: str, port: int) -> WSGIServer:
    """The HTTP server of ``exporter``'s metrics on host:port (a thread of its own, until
    ``shutdown()``); the address it is bound to is its ``server_address``."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(exporter))
    try:
        server, _thread = start_http_server(port, addr=host, registry=registry)
    except OSError as exc:
        raise ClusterkitError(f"cannot serve metrics on {url(host, port)}: "
                              f"{exc.strerror or exc}", f"another {OPTION} [HOST:]PORT") from exc
    return server


def url(host: str, port: int) -> str:
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"
