"""A node's metric files in a job dir, each with its one writer and its one reader: the
sampler's samples (``metrics.jsonl``, one ``Sample`` a line) and the job's running
totals (``summary.json``, ``totals.Summary``). Stdlib only, Python >= 3.8: shipped
beside the supervisor (which writes them) and sent before the observer (which reads
them for `top` and the job's report) and the follower (which tails the samples).

One sample (``Sample.to_json``)::

    {"v": 1, "t": epoch, "node": int, "dt": s | None, "job_cpu": cores | None,
     "cpu": {"user", "system", "idle", "iowait"} (%) | None,
     "mem": {"used_mb", "total_mb"} | None, "net": {"rx_Bps", "tx_Bps"} | None,
     "disk": {"device", "read_MBps", "read_ms_per_op"} | None,
     "samples_per_s": float | None, "progress_at": epoch | None,
     "gpus": [{"index", "name", "util", "mem_used", "mem_total", "power", "temp"}]}

"gpus" is absent when nvidia-smi did not answer. The file is rotated to
``metrics.1.jsonl`` past the writer's ``max_bytes``; a line without "v" (an older
sampler's) is version 1."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

try:  # imported as clusterkit.node.samples
    from .nodefiles import read_json, write_json
    from .totals import Summary, Totals
    from .wire import WireError, as_dict, as_float, as_int, stamped, version_of
except ImportError:  # a file beside wire.py in a job dir, or sent over stdin
    from nodefiles import read_json, write_json
    from totals import Summary, Totals
    from wire import WireError, as_dict, as_float, as_int, stamped, version_of

SAMPLES, SAMPLES_OLD = "metrics.jsonl", "metrics.1.jsonl"  # the newest lines, the rotated
SUMMARY = "summary.json"  # the job's running totals on this node


@dataclass(frozen=True)
class Sample:
    """One metrics sample of a node: its rates cover the ``dt`` seconds before ``t`` (the
    first sample only primes the counters: every rate in it is None). The measured
    groups (cpu, mem, net, disk, each GPU) are kept as the flat objects the sampler
    writes."""

    KIND = "metrics sample"
    VERSION = 1

    t: float
    node: int = 0
    dt: float | None = None
    job_cpu: float | None = None
    cpu: dict | None = None
    mem: dict | None = None
    net: dict | None = None
    disk: dict | None = None
    samples_per_s: float | None = None
    progress_at: float | None = None
    gpus: tuple[dict, ...] | None = None  # None: nvidia-smi did not answer

    def to_json(self) -> dict:
        data = stamped(self.VERSION, {
            "t": self.t, "node": self.node, "dt": self.dt, "job_cpu": self.job_cpu,
            "cpu": self.cpu, "mem": self.mem, "net": self.net, "disk": self.disk,
            "samples_per_s": self.samples_per_s, "progress_at": self.progress_at})
        if self.gpus is not None:
            data["gpus"] = [dict(g) for g in self.gpus]
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> Sample:
        data = version_of(data, cls.KIND, cls.VERSION, where)
        t = as_float(data.get("t"))
        if t is None:
            raise WireError(cls.KIND, where, "has no time (t)")
        gpus = data.get("gpus")
        return cls(t, as_int(data.get("node"), 0), as_float(data.get("dt")),
                   as_float(data.get("job_cpu")), as_dict(data.get("cpu")),
                   as_dict(data.get("mem")), as_dict(data.get("net")),
                   as_dict(data.get("disk")), as_float(data.get("samples_per_s")),
                   as_float(data.get("progress_at")),
                   None if not isinstance(gpus, list) else
                   tuple(dict(g) for g in gpus if isinstance(g, dict)))


class SamplesFile:
    """The one writer of a job dir's samples: one JSON line per sample appended to
    ``metrics.jsonl``, moved to ``metrics.1.jsonl`` once past ``max_bytes``."""

    def __init__(self, job_dir: str, max_bytes: int = 4 << 20):
        self.path = os.path.join(job_dir, SAMPLES)
        self.old = os.path.join(job_dir, SAMPLES_OLD)
        self.max_bytes = max_bytes

    def append(self, sample: Sample) -> dict:
        """Writes ``sample``; its JSON. A full disk must not stop the supervisor: the
        line is lost, no more."""
        data = sample.to_json()
        try:
            with open(self.path, "a") as f:
                f.write(json.dumps(data, separators=(",", ":")) + "\n")
                size = f.tell()
            if size > self.max_bytes:
                os.replace(self.path, self.old)
        except OSError:
            pass
        return data


def read_samples(job_dir: str, after: float | None = None, last: int | None = None,
                 node: str = "") -> list[Sample]:
    """The samples of ``metrics.1.jsonl`` then ``metrics.jsonl`` taken after epoch
    ``after`` (all without it), at most the ``last`` ones; a line that is no sample (cut
    by a crash, being written) is skipped; one of a newer version than this program
    reads is a WireError naming the file (and ``node``, where given)."""
    kept = []
    for name in (SAMPLES_OLD, SAMPLES):
        try:
            with open(os.path.join(job_dir, name)) as handle:
                lines = handle.readlines()
        except OSError:
            continue
        for line in lines:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            t = data.get("t") if isinstance(data, dict) else None
            if as_float(t) is not None and (after is None or t > after):
                kept.append((name, data))
    if last is not None:
        kept = kept[-last:] if last > 0 else []
    # typed once cut to what is asked: a frame of `top` reads every line, keeps a few
    where = f"{node}: " if node else ""
    return [Sample.from_json(data, where + os.path.join(job_dir, name)) for name, data in kept]


def write_summary(job_dir: str, totals: Totals | Summary) -> None:
    """summary.json in ``job_dir`` (the supervisor's, after each sample), atomic."""
    record = totals if isinstance(totals, Summary) else totals.summary()
    write_json(os.path.join(job_dir, SUMMARY), record.to_json())


def read_summary(job_dir: str, node: str = "") -> Summary | None:
    """summary.json in ``job_dir``: None when absent or not JSON (being written by an
    older supervisor); a WireError when of a newer version (``node``: who reads it)."""
    path = os.path.join(job_dir, SUMMARY)
    data = read_json(path)
    return None if data is None else Summary.from_json(data, f"{node}: {path}" if node else path)
