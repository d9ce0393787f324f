"""The per-node metrics sampler: stdlib only, Python >= 3.8.

Shipped beside ``supervisor_daemon.py`` into every job dir; the daemon calls
``Sampler.step(now)`` from its loop, which appends one sample (``samples.Sample``: its
fields, its file ``metrics.jsonl`` and that file's rotation are there) per ``interval``.

The first sample only primes the counters: every rate in it (dt, job_cpu, cpu, net,
disk, samples_per_s) is None. "gpus" is absent when nvidia-smi did not answer.
"""

from __future__ import annotations

import os
import re
import subprocess

try:  # imported as clusterkit.node.sampler
    from .gpuwatch import Reader
    from .samples import Sample, SamplesFile
except ImportError:  # a file beside gpuwatch.py in a job dir
    from gpuwatch import Reader
    from samples import Sample, SamplesFile

GPU_QUERY = ["nvidia-smi",
             "--query-gpu=index,name,utilization.gpu,memory.used,memory.total,"
             "power.draw,temperature.gpu",
             "--format=csv,noheader,nounits"]
GPU_KEYS = ("index", "name", "util", "mem_used", "mem_total", "power", "temp")
SMI_TIMEOUT = 2.0
SMI_RETRY = 60.0
LOG_READ_MAX = 1 << 20  # per file per call: only the newest lines matter
THROUGHPUT_RE = re.compile(r"(\d+(?:\.\d+)?)\s*samples/s(?:ec)?\b", re.I)
PROGRESS_RE = re.compile(r"(?<![A-Za-z])step[\s:=#]*\d+|\bEpoch\s*\[\d+\]|\bBatch\s*\[", re.I)


# ----- parsers: text -> plain data ------------------------------------------------

def _num(text: str) -> int | float | None:
    text = text.strip()
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return None  # "[N/A]", "[Not Supported]", "N/A"


def parse_gpu_csv(text: str) -> list[dict]:
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != len(GPU_KEYS):
            continue
        gpu = {k: _num(fields[i]) for i, k in enumerate(GPU_KEYS)}
        gpu["name"] = fields[1]
        gpus.append(gpu)
    return gpus


_TABLE_ID = re.compile(r"^\|\s+(\d+)\s+(.+?)\s+(?:On|Off)\s+\|\s+[0-9A-Fa-f]+:[0-9A-Fa-f]+:")
_TABLE_USE = re.compile(r"^\|\s*\S+\s+(\S+)\s+\S+\s+(\S+)\s*/\s*\S+\s*\|"
                        r"\s*(\S+)\s*/\s*(\S+)\s*\|\s*(\S+)\s")


def _unit(text: str, unit: str) -> int | float | None:
    return _num(text[:-len(unit)]) if text.endswith(unit) else None


def parse_gpu_table(text: str) -> list[dict]:
    """Plain ``nvidia-smi``: each GPU is an id row (index, name as the table cuts it)
    followed by a usage row (temp, power, memory, util)."""
    gpus: list[dict] = []
    for line in text.splitlines():
        m = _TABLE_ID.match(line)
        if m:
            gpus.append({"index": int(m.group(1)), "name": m.group(2)})
            continue
        m = _TABLE_USE.match(line)
        if m and gpus and "util" not in gpus[-1]:
            temp, power, used, total, util = m.groups()
            gpus[-1].update(util=_unit(util, "%"), mem_used=_unit(used, "MiB"),
                            mem_total=_unit(total, "MiB"), power=_unit(power, "W"),
                            temp=_unit(temp, "C"))
    return [g for g in gpus if "util" in g]


def parse_proc_stat(text: str) -> dict | None:
    """Aggregate jiffies of /proc/stat; guest time is already inside user."""
    for line in text.splitlines():
        f = line.split()
        if f[:1] == ["cpu"] and len(f) >= 9:
            v = [int(x) for x in f[1:9]]  # user nice system idle iowait irq softirq steal
            return {"user": v[0] + v[1], "system": v[2] + v[5] + v[6], "idle": v[3],
                    "iowait": v[4], "steal": v[7], "total": sum(v)}
    return None


def cpu_percentages(before: dict, after: dict) -> dict | None:
    total = after["total"] - before["total"]
    if total <= 0:
        return None
    return {k: round(100.0 * (after[k] - before[k]) / total, 2)
            for k in ("user", "system", "idle", "iowait")}


def parse_cgroup_cpu(text: str) -> int | None:
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "usage_usec":
            return int(f[1])
    return None


def parse_pid_stat(text: str) -> int | None:
    """utime + stime ticks; the comm field may hold spaces and parens."""
    rest = text[text.rfind(")") + 1:].split()
    try:
        return int(rest[11]) + int(rest[12])  # fields 14 and 15 of proc(5)
    except (IndexError, ValueError):
        return None


def parse_net_dev(text: str) -> dict:
    rx = tx = 0
    for line in text.splitlines():
        name, sep, data = line.partition(":")
        f = data.split()
        if sep and name.strip() != "lo" and len(f) >= 9 and f[0].isdigit():
            rx, tx = rx + int(f[0]), tx + int(f[8])
    return {"rx": rx, "tx": tx}


def parse_diskstats(text: str, device: str) -> dict | None:
    name = os.path.basename(device)
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 7 and f[2] == name:
            return {"reads": int(f[3]), "sectors_read": int(f[5]), "ms_reading": int(f[6])}
    return None


def disk_rates(before: dict, after: dict, seconds: float) -> dict | None:
    d = {k: after[k] - before[k] for k in after}
    if seconds <= 0 or min(d.values()) < 0:
        return None
    return {"read_MBps": round(d["sectors_read"] * 512 / 1e6 / seconds, 3),
            "read_ms_per_op": round(d["ms_reading"] / d["reads"], 3) if d["reads"] else None}


def parse_meminfo(text: str) -> dict | None:
    kb = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 2 and f[1].isdigit():
            kb[f[0].rstrip(":")] = int(f[1])
    if "MemTotal" not in kb:
        return None
    avail = kb.get("MemAvailable",
                   kb.get("MemFree", 0) + kb.get("Buffers", 0) + kb.get("Cached", 0))
    return {"used_mb": (kb["MemTotal"] - avail) // 1024, "total_mb": kb["MemTotal"] // 1024}


def throughput(line: str, pattern: str | re.Pattern | None = None) -> float | None:
    """``N samples/s`` or ``samples/sec`` (MXNet's Speedometer, torch-style logs); a
    user pattern (``train.throughput_pattern``, one group) replaces the built-in one."""
    rx = THROUGHPUT_RE if pattern is None else re.compile(pattern)
    m = rx.search(line)
    if m is None:
        return None
    try:
        return float(m.group(1) if rx.groups else m.group(0))
    except (TypeError, ValueError):
        return None


def is_progress(line: str, pattern: str | re.Pattern | None = None) -> bool:
    return throughput(line, pattern) is not None or PROGRESS_RE.search(line) is not None


# ----- logs -------------------------------------------------------------------------

class LogTail:
    """Follows files by offset: each ``read()`` gives the new complete lines per path.
    A missing file is skipped; a shorter or replaced one (truncated, rotated) restarts
    at 0; more than LOG_READ_MAX new bytes skips ahead to the newest."""

    def __init__(self, paths: list[str] | tuple = ()):
        self.paths = list(paths)
        self.state: dict = {}  # path -> [inode, offset, partial bytes]
        self.mtimes: dict = {}

    def read(self) -> dict:
        out = {}
        for path in self.paths:
            lines = self._read_one(path)
            if lines:
                out[path] = lines
        return out

    def _read_one(self, path: str) -> list[str]:
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                ino, off, part = self.state.get(path, (st.st_ino, 0, b""))
                if ino != st.st_ino or st.st_size < off:
                    off, part = 0, b""
                if st.st_size - off > LOG_READ_MAX:
                    off, part = st.st_size - LOG_READ_MAX, None  # None: drop a cut line
                f.seek(off)
                data = f.read(LOG_READ_MAX)
        except OSError:
            return []
        self.mtimes[path] = st.st_mtime
        lines = data.split(b"\n")
        lines[0] = b"" if part is None else part + lines[0]
        self.state[path] = (st.st_ino, off + len(data), lines[-1])
        return [x.decode("utf-8", "replace").rstrip("\r") for x in lines[:-1] if x]


# ----- the sampler -------------------------------------------------------------------

def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


class JobCpu:
    """The job's CPU time: its cgroup's where that is readable, else its pids' ticks."""

    def __init__(self, proc_root: str, cgroup_path: str | None = None, pids_fn=None):
        self.proc, self.cgroup_path, self.pids_fn = proc_root, cgroup_path, pids_fn
        self.tck = os.sysconf("SC_CLK_TCK")

    def raw(self) -> tuple | None:
        """("cgroup", usage_usec) where the cgroup is readable, else ("pids", {pid: ticks})."""
        if self.cgroup_path:
            text = _read(os.path.join(self.cgroup_path, "cpu.stat"))
            usec = parse_cgroup_cpu(text) if text else None
            if usec is not None:
                return ("cgroup", usec)
        if self.pids_fn is None:
            return None
        ticks = {}
        for pid in self.pids_fn():
            text = _read(os.path.join(self.proc, str(pid), "stat"))
            t = parse_pid_stat(text) if text else None
            if t is not None:
                ticks[pid] = t
        return ("pids", ticks)

    def cores(self, before: tuple | None, after: tuple | None, dt: float) -> float | None:
        if not before or not after or before[0] != after[0]:
            return None
        if after[0] == "cgroup":
            return round(max(0, after[1] - before[1]) / 1e6 / dt, 3)
        # A pid that is new (or reused) counts whole; one that ended loses its last interval.
        ticks = 0
        for pid, t in after[1].items():
            old = before[1].get(pid, 0)
            ticks += t - old if t >= old else t
        return round(ticks / self.tck / dt, 3)


class GpuProbe:
    """The GPUs as ``nvidia-smi`` tells them; one that failed is asked again at most
    every SMI_RETRY s."""

    def __init__(self, nvidia_smi: str = "nvidia-smi"):
        self.argv = [nvidia_smi] + GPU_QUERY[1:]
        self.reader = Reader(timeout=SMI_TIMEOUT)
        self.failed_at: float | None = None

    def read(self, now: float) -> list[dict] | None:
        if self.failed_at is not None and 0 <= now - self.failed_at < SMI_RETRY:
            return None
        # A hung nvidia-smi (a GPU fallen off the bus) can stay unkillable in D state:
        # the reader never waits for it, and starts no other while it lives.
        out = self.reader.output(self.argv)
        gpus = None if out is None else parse_gpu_csv(out) or None
        self.failed_at = None if gpus else now
        return gpus

    @property
    def stuck(self) -> subprocess.Popen | None:
        return self.reader.stuck.get(self.argv[0])


class Sampler:
    def __init__(self, job_dir: str, *, cgroup_path: str | None = None, pids_fn=None,
                 logs: list[str] | tuple = (), dataset_device: str | None = None,
                 interval: float = 2.0, throughput_pattern: str | None = None,
                 node: int = 0, nvidia_smi: str = "nvidia-smi", proc_root: str = "/proc",
                 max_bytes: int = 4 << 20):
        self.file = SamplesFile(job_dir, max_bytes)
        self.job = JobCpu(proc_root, cgroup_path, pids_fn)
        self.gpu = GpuProbe(nvidia_smi)
        self.device, self.interval, self.node = dataset_device, interval, node
        self.pattern = re.compile(throughput_pattern) if throughput_pattern else None
        self.proc = proc_root
        self.tail = LogTail(logs)
        self.prev: dict | None = None
        self.prev_t: float | None = None
        self.last_step: float | None = None
        self.progress_at: float | None = None

    def step(self, now: float) -> dict | None:
        """Samples and appends a line when ``interval`` has passed since the last; the
        sample's JSON (as written)."""
        if self.last_step is not None and 0 <= now - self.last_step < self.interval:
            return None
        self.last_step = now
        return self.file.append(self.record(now))

    def sample(self, now: float) -> dict:
        """A sample taken now, not written: its JSON."""
        return self.record(now).to_json()

    def record(self, now: float) -> Sample:
        raw = self._raw()
        prev, dt = self.prev, (now - self.prev_t if self.prev_t is not None else None)
        ok = prev is not None and dt is not None and dt > 0
        found = Sample(
            now, self.node, round(dt, 3) if ok else None,
            self.job.cores(prev["job"], raw["job"], dt) if ok else None,
            cpu_percentages(prev["stat"], raw["stat"])
            if ok and prev["stat"] and raw["stat"] else None,
            parse_meminfo(_read(self._p("meminfo")) or ""),
            self._net(prev["net"], raw["net"], dt) if ok else None,
            self._disk(prev["disk"], raw["disk"], dt) if ok else None,
            self._logs(now, ok), self.progress_at, self._gpus(now))
        self.prev, self.prev_t = raw, now
        return found

    def _p(self, *parts: str) -> str:
        return os.path.join(self.proc, *parts)

    def _raw(self) -> dict:
        stat, net = _read(self._p("stat")), _read(self._p("net", "dev"))
        disk = _read(self._p("diskstats")) if self.device else None
        return {"stat": parse_proc_stat(stat) if stat else None,
                "net": parse_net_dev(net) if net else None,
                "disk": parse_diskstats(disk, self.device) if disk and self.device else None,
                "job": self.job.raw()}

    @staticmethod
    def _net(before: dict | None, after: dict | None, dt: float) -> dict | None:
        if not before or not after or after["rx"] < before["rx"] or after["tx"] < before["tx"]:
            return None
        return {"rx_Bps": round((after["rx"] - before["rx"]) / dt, 1),
                "tx_Bps": round((after["tx"] - before["tx"]) / dt, 1)}

    def _disk(self, before: dict | None, after: dict | None, dt: float) -> dict | None:
        rates = disk_rates(before, after, dt) if before and after else None
        return {"device": self.device, **rates} if rates else None

    def _logs(self, now: float, ok: bool) -> float | None:
        """Per log file the mean throughput of its new lines, summed over files; the
        newest progress line is dated by its file's mtime (it was written by then)."""
        total, seen = 0.0, False
        for path, lines in self.tail.read().items():
            values = [v for v in (throughput(x, self.pattern) for x in lines) if v is not None]
            if values:
                total, seen = total + sum(values) / len(values), True
            if values or any(PROGRESS_RE.search(x) for x in lines):
                at = min(now, self.tail.mtimes.get(path, now))
                self.progress_at = max(at, self.progress_at or at)
        return round(total, 3) if seen and ok else None

    def _gpus(self, now: float) -> tuple[dict, ...] | None:
        gpus = self.gpu.read(now)
        return None if gpus is None else tuple(gpus)

    @property
    def smi_stuck(self) -> subprocess.Popen | None:
        """The hung nvidia-smi the sampler left, if any."""
        return self.gpu.stuck
