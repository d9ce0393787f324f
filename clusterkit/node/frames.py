"""The observer's answers (``observer.py``: one per call, printed to the client): wire
records (``wire``). Stdlib only, Python >= 3.8: sent before the observer over stdin
(``bundle.OBSERVER``), imported by the client as ``clusterkit.node.frames``.

A record the observer cannot read (a newer sampler's or supervisor's) is no frame: the
observer says it on stderr (naming the file and both versions) and exits
``EXIT_UNREADABLE``; the client names the node."""

from __future__ import annotations

from dataclasses import dataclass

try:  # imported as clusterkit.node.frames
    from .samples import SAMPLES, SUMMARY, Sample
    from .totals import Summary
    from .wire import as_dict, as_list, as_str, stamped, version_of
except ImportError:  # sent over stdin: bundle.program puts these in sys.modules
    from samples import SAMPLES, SUMMARY, Sample
    from totals import Summary
    from wire import as_dict, as_list, as_str, stamped, version_of

EXIT_UNREADABLE = 3  # the observer's exit: a record of a newer version than it reads


@dataclass(frozen=True)
class Frame:
    """The ``observe`` verb's answer: a job's newest samples here (and its GPUs' health),
    and how the job stands here (its state.json: on the master of an elastic job, its
    size changes)."""

    KIND = "observer frame"
    VERSION = 1

    job_id: str | None
    samples: tuple[Sample, ...] = ()
    health: dict | None = None  # asked for (--health): {"smi_q", "kernel_log"}
    state: dict | None = None  # the job's state.json here as written (None: none): the
    # client reads it (``nodestate.parse``), as the follower's

    def to_json(self) -> dict:
        data = stamped(self.VERSION, {"job_id": self.job_id,
                                      "samples": [s.to_json() for s in self.samples]})
        if self.health is not None:
            data["health"] = self.health
        if self.state is not None:
            data["state"] = self.state
        return data

    @classmethod
    def from_json(cls, data: object, where: str) -> Frame:
        """``where`` names the node ("worker-1: observer frame")."""
        data = version_of(data, cls.KIND, cls.VERSION, where)
        return cls(as_str(data.get("job_id")),
                   tuple(Sample.from_json(s, f"{where}: {SAMPLES}")
                         for s in as_list(data.get("samples"))),
                   as_dict(data.get("health")), as_dict(data.get("state")))


@dataclass(frozen=True)
class SummaryFrame:
    """The ``summary`` verb's answer: the job's totals here, and the report kept (its
    JSON, read by the client: ``training/report.py`` is not on the nodes)."""

    KIND = "observer summary"
    VERSION = 1

    totals: Summary | None = None
    report: dict | None = None

    def to_json(self) -> dict:
        return stamped(self.VERSION, {
            "totals": None if self.totals is None else self.totals.to_json(),
            "report": self.report})

    @classmethod
    def from_json(cls, data: object, where: str) -> SummaryFrame:
        data = version_of(data, cls.KIND, cls.VERSION, where)
        totals = data.get("totals")
        return cls(None if totals is None else Summary.from_json(totals, f"{where}: {SUMMARY}"),
                   as_dict(data.get("report")))
