"""What a long-running command tells its caller while it works: stage started / done,
per-node or per-item progress, warnings, info lines. The layers that do the work
(cluster/, dataset/) send ``Event`` values to a ``Reporter`` and never print; cli/
renders them (rich lines and progress bars), tests collect them, and the null reporter
drops them. Texts are plain (no markup): how an event looks is the renderer's choice."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Kind(Enum):
    STAGE_STARTED = "stage-started"
    STAGE_DONE = "stage-done"
    PROGRESS = "progress"  # one node (or item) further: ``node``, ``done`` of ``total``
    WARNING = "warning"
    ERROR = "error"  # something failed; the command may still go on or clean up
    INFO = "info"


class Stage(Enum):
    KEY_PAIR = "key-pair"
    STACK = "stack"
    LAUNCH = "launch"
    START = "start"  # stopped nodes started again
    TERMINATE = "terminate"
    MOUNT_TARGET = "mount-target"
    SSH = "ssh"
    BOOTSTRAP = "bootstrap"  # node steps after SSH answers (bootstrap/run.py)
    UP = "up"
    DOWN = "down"
    PACK = "pack"
    DATASET = "dataset"  # deploy-dataset: snapshot checks, clones per node
    PUBLISH = "publish"  # snapshot-dataset: manifest, image, upload, tags
    TRAIN = "train"  # train: checks, workdir sync, job start on every node
    AUTOSTOP = "autostop"  # each node's idle watchdog installed or removed


@dataclass(frozen=True)
class Event:
    kind: Kind
    text: str
    stage: Stage | None = None
    node: str | None = None  # the instance id a PROGRESS event is about
    done: int | None = None
    total: int | None = None  # on STAGE_STARTED: the stage has a countable end (a bar)
    level: int = 0  # 0: a line of its own; 1: a detail under the stage above it


class Reporter(Protocol):
    def __call__(self, event: Event) -> None: ...


def null_reporter(event: Event) -> None:
    """Drops every event (a caller that wants only the result)."""


class Collect:
    """A reporter that keeps every event (tests, or a caller that reports later)."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def texts(self, kind: Kind | None = None) -> list[str]:
        return [e.text for e in self.events if kind is None or e.kind is kind]
