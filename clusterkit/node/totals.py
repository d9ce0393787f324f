"""A job's running totals on one node, for its report (``training/report.py``): kept by
the supervisor from each metric sample (``sampler.py``) in ``summary.json`` of the job's
directory, so the report covers the whole run however long (the samples themselves are
rotated). Stdlib only, Python >= 3.8: shipped beside the supervisor.

GPU utilization is kept as a histogram (seconds at each whole percent of the node's mean
over its GPUs), so p5/p95 need no sample kept. Throughput counts twice: every sample,
and the steady state, from ``WARMUP_S`` after the first throughput line on."""

from __future__ import annotations

WARMUP_S = 60.0  # start-up, data loader warm-up and the first (slow) batches left out
BUCKETS = 101  # 0..100 %


class Totals:
    def __init__(self, data: dict | None = None):
        data = data or {}
        self.first_t = data.get("first_t")
        self.last_t = data.get("last_t")
        self.seconds = float(data.get("seconds", 0.0))
        self.util_hist = list(data.get("util_hist") or [0.0] * BUCKETS)
        self.gpu_seconds = float(data.get("gpu_seconds", 0.0))
        self.gpus = data.get("gpus")  # GPUs in the newest sample that had the field
        self.cpu_core_seconds = float(data.get("cpu_core_seconds", 0.0))
        self.cpu_seconds = float(data.get("cpu_seconds", 0.0))
        self.samples = float(data.get("samples", 0.0))
        self.rate_from = data.get("rate_from")  # epoch of the first throughput line
        self.steady_samples = float(data.get("steady_samples", 0.0))
        self.steady_seconds = float(data.get("steady_seconds", 0.0))

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

    def to_json(self) -> dict:
        return dict(self.__dict__)


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
