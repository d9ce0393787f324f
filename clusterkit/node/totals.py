"""A job's running totals on one node, for its report (``training/report.py``): kept by
the supervisor from each metric sample (``sampler.py``) in ``summary.json`` of the job's
directory, so the report covers the whole run however long (the samples themselves are
rotated). Stdlib only, Python >= 3.8: shipped beside the supervisor.

GPU utilization is kept as a histogram (seconds at each whole percent of the node's mean
over its GPUs), so p5/p95 need no sample kept. Throughput counts twice: every sample,
and the steady state, from ``WARMUP_S`` after the first throughput line on.

``Summary`` is what summary.json holds (a wire record; the file's one writer and one
reader are ``samples.write_summary``/``read_summary``: this module is PURE); ``Totals``
is the running sum the supervisor adds each sample to."""

from __future__ import annotations

from dataclasses import dataclass, fields

try:  # imported as clusterkit.node.totals
    from .wire import as_float, as_int, as_list, stamped, version_of
except ImportError:  # a file beside wire.py in a job dir, or sent over stdin
    from wire import as_float, as_int, as_list, stamped, version_of

WARMUP_S = 60.0  # start-up, data loader warm-up and the first (slow) batches left out
BUCKETS = 101  # 0..100 %


@dataclass(frozen=True)
class Summary:
    """A job's totals on one node (summary.json), as of its newest sample."""

    KIND = "job totals"
    VERSION = 1

    first_t: float | None = None
    last_t: float | None = None
    seconds: float = 0.0
    util_hist: tuple[float, ...] = (0.0,) * BUCKETS  # seconds at each whole percent
    gpu_seconds: float = 0.0
    gpus: int | None = None  # GPUs in the newest sample that had the field
    cpu_core_seconds: float = 0.0
    cpu_seconds: float = 0.0
    samples: float = 0.0
    rate_from: float | None = None  # epoch of the first throughput line
    steady_samples: float = 0.0
    steady_seconds: float = 0.0

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["util_hist"] = list(self.util_hist)
        return stamped(self.VERSION, data)

    @classmethod
    def from_json(cls, data: object, where: str) -> Summary:
        data = version_of(data, cls.KIND, cls.VERSION, where)
        hist = [as_float(v, 0.0) for v in as_list(data.get("util_hist"))][:BUCKETS]
        sums = {name: as_float(data.get(name), 0.0) for name in SUMS}
        return cls(first_t=as_float(data.get("first_t")), last_t=as_float(data.get("last_t")),
                   util_hist=tuple(hist + [0.0] * (BUCKETS - len(hist))),
                   gpus=as_int(data.get("gpus")), rate_from=as_float(data.get("rate_from")),
                   **sums)


SUMS = ("seconds", "gpu_seconds", "cpu_core_seconds", "cpu_seconds", "samples",
        "steady_samples", "steady_seconds")  # Summary's fields that only grow


class Totals:
    """The running totals (``Summary``'s fields, kept mutable while samples come)."""

    def __init__(self, data: dict | Summary | None = None):
        kept = data if isinstance(data, Summary) else Summary.from_json(data or {}, "totals")
        self.first_t, self.last_t, self.seconds = kept.first_t, kept.last_t, kept.seconds
        self.util_hist = list(kept.util_hist)
        self.gpu_seconds, self.gpus = kept.gpu_seconds, kept.gpus
        self.cpu_core_seconds, self.cpu_seconds = kept.cpu_core_seconds, kept.cpu_seconds
        self.samples, self.rate_from = kept.samples, kept.rate_from
        self.steady_samples, self.steady_seconds = kept.steady_samples, kept.steady_seconds

    def add(self, sample: dict) -> None:
        """One sample (its rates cover the ``dt`` seconds before its time)."""
        now, dt = float(sample["t"]), sample.get("dt")
        self.first_t = now if self.first_t is None else self.first_t
        self.last_t = now
        if not dt:
            return
        dt = float(dt)
        self.seconds += dt
        self._gpus(sample.get("gpus"), dt)
        if sample.get("job_cpu") is not None:
            self.cpu_core_seconds += float(sample["job_cpu"]) * dt
            self.cpu_seconds += dt
        self._rate(sample.get("samples_per_s"), now, dt)

    def _gpus(self, gpus: list | None, dt: float) -> None:
        if gpus is None:
            return
        self.gpus = len(gpus)
        utils = [float(g["util"]) for g in gpus if g.get("util") is not None]
        if utils:
            mean = sum(utils) / len(utils)
            self.util_hist[max(0, min(BUCKETS - 1, int(round(mean))))] += dt
            self.gpu_seconds += dt

    def _rate(self, rate: float | None, now: float, dt: float) -> None:
        if rate is None:
            return
        if self.rate_from is None:
            self.rate_from = now - dt
        self.samples += float(rate) * dt
        if now - self.rate_from > WARMUP_S:
            self.steady_samples += float(rate) * dt
            self.steady_seconds += dt

    def summary(self) -> Summary:
        return Summary(**{**self.__dict__, "util_hist": tuple(self.util_hist)})

    def to_json(self) -> dict:
        """summary.json's content (``Summary.to_json``)."""
        return self.summary().to_json()


def percentile(hist: list, q: float) -> float | None:
    """The ``q`` quantile (0..1) of a seconds-per-percent histogram."""
    total = sum(hist)
    if total <= 0:
        return None
    running = 0.0
    for value, seconds in enumerate(hist):
        running += seconds
        if running >= q * total:
            return float(value)
    return float(len(hist) - 1)
