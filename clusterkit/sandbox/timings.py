"""AWS's own timings, for a sandbox that waits as AWS does (`clusterkit sandbox start
--timings aws[:SCALE]`): one table, each figure with its source (``../shared/REFERENCE.md``
collects them), scaled by SCALE (default 0.1) so tests and benches stay short. The
sandbox sleeps these in timers and request threads: a wait costs no CPU.

Off by default: the untimed sandbox answers every call at once and boots a node as soon
as it can, which is what the test suite wants. PURE (data and arithmetic)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

DEFAULT_SCALE = 0.1
PROFILE = "aws"


class Wait(str, Enum):
    """A wait AWS imposes, apart from the API round trip."""

    INSTANCE_RUNNING = "instance pending -> running"
    SSH_ANSWERS = "instance running -> sshd answers"


@dataclass(frozen=True)
class Figure:
    seconds: float
    source: str


# An API call's round trip by call family, client in the region (a far client adds
# 80-230 ms a round trip: REFERENCE.md).
ROUND_TRIPS: Mapping[str, Figure] = MappingProxyType({
    "describe": Figure(0.15, "EC2 API round trip in-region, typical (no published SLA; "
                             "daemonology.net 2021-08-12 times whole calls at 0.1-0.3 s)"),
    "mutate": Figure(0.3, "EC2/CloudFormation write calls (no published SLA; same runs)"),
    "run_instances": Figure(1.5, "RunInstances call, one run: daemonology.net 2021-08-12 "
                                 "\"EC2 boot time benchmarking\""),
})
WAITS: Mapping[Wait, Figure] = MappingProxyType({
    Wait.INSTANCE_RUNNING: Figure(5.0, "pending -> running ~5 s (daemonology.net "
                                       "2021-08-12; 16-18 s with a 15 s-polling waiter, an "
                                       "upper bound: brevdev/ec2-coldboot-research)"),
    Wait.SSH_ANSWERS: Figure(5.0, "running -> SSH accepts 3-6 s with cloud-init (brevdev/"
                                  "ec2-coldboot-research; daemonology.net)"),
})
READ_PREFIXES = ("Describe", "List", "Get", "Head")


def family(operation: str) -> str:
    """The round-trip family of an API operation (``RunInstances`` -> run_instances)."""
    if operation == "RunInstances":
        return "run_instances"
    return "describe" if operation.startswith(READ_PREFIXES) else "mutate"


@dataclass(frozen=True)
class Timings:
    """The table in force: ``scale`` times every figure (0: the untimed sandbox)."""

    scale: float = 0.0
    round_trips: Mapping[str, Figure] = field(default_factory=lambda: ROUND_TRIPS)
    waits: Mapping[Wait, Figure] = field(default_factory=lambda: WAITS)

    @property
    def on(self) -> bool:
        return self.scale > 0

    def round_trip(self, operation: str) -> float:
        """Seconds the sandbox's HTTP server holds a call of ``operation`` back."""
        return self.scale * self.round_trips[family(operation)].seconds if self.on else 0.0

    def wait(self, what: Wait) -> float:
        return self.scale * self.waits[what].seconds if self.on else 0.0

    def to_json(self) -> dict[str, Any]:
        """The table as `sandbox status --json` shows it: AWS's figure, the scaled one,
        and the source of each."""
        def row(fig: Figure) -> dict[str, Any]:
            return {"aws_s": fig.seconds, "sandbox_s": round(fig.seconds * self.scale, 4),
                    "source": fig.source}

        return {"profile": PROFILE if self.on else "none", "scale": self.scale,
                "round_trips": {k: row(v) for k, v in self.round_trips.items()},
                "waits": {w.value: row(f) for w, f in self.waits.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Timings:
        return cls(float(data.get("scale", 0.0))) if data else cls()


def parse(text: str | None) -> Timings:
    """``--timings`` as given: None or "none" -> off; "aws" -> AWS's at DEFAULT_SCALE;
    "aws:SCALE" -> AWS's times SCALE (0 < SCALE <= 10). ValueError says what is wrong."""
    if text is None or text.strip().lower() in ("", "none", "off"):
        return Timings()
    name, _, scale = text.strip().partition(":")
    if name != PROFILE:
        raise ValueError(f"--timings {text!r}: the profile is `{PROFILE}` (or `none`), "
                         f"with an optional :SCALE, e.g. {PROFILE}:0.1")
    try:
        value = float(scale) if scale else DEFAULT_SCALE
    except ValueError:
        raise ValueError(f"--timings {text!r}: SCALE must be a number, e.g. "
                         f"{PROFILE}:0.1") from None
    if not 0 < value <= 10:
        raise ValueError(f"--timings {text!r}: SCALE must be above 0 and at most 10")
    return Timings(value)
