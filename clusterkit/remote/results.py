"""What a fan-out hands back: one frozen ``NodeResult`` per node and a ``GroupResult``
over all of them (Fabric's ``GroupResult``). A node that could not be reached carries
``error`` + ``hint`` and no exit code; one that ran carries its exit code and the tails
of its output. ``GroupError`` (errors.py) carries the whole ``GroupResult``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from clusterkit.plan.nodes import Node


@dataclass(frozen=True)
class NodeResult:
    """One node's outcome. ``label`` names the node in output (unique in its cluster);
    ``address`` is where it was dialled, ``via`` the gateway's address (None: direct)."""

    node: Node
    label: str
    address: str
    via: str | None = None
    exit_code: int | None = None  # None: it never ran to an end (unreachable, timed out)
    stdout: str = ""  # tail
    stderr: str = ""  # tail
    seconds: float | None = None  # None: it never started
    error: str | None = None  # why it could not run (connection, host key, timeout)
    hint: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.exit_code == 0

    @property
    def reason(self) -> str:
        """Why it failed, in a few words: the error, else the exit code."""
        return self.error or f"exit {self.exit_code}"

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``exec --json``): node identity, then the outcome."""
        return {"index": self.node.index, "role": self.node.role,
                "instance_id": self.node.instance_id, "address": self.address,
                "via": self.via, "ok": self.ok, "exit_code": self.exit_code,
                "stdout": self.stdout, "stderr": self.stderr, "error": self.error,
                "hint": self.hint, "seconds": self.seconds}


class GroupResult(Mapping[str, NodeResult]):
    """label -> NodeResult in the order the nodes were given; read-only."""

    def __init__(self, results: Iterable[NodeResult] = ()) -> None:
        self._by_label = MappingProxyType({r.label: r for r in results})

    def __getitem__(self, label: str) -> NodeResult:
        return self._by_label[label]

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_label)

    def __len__(self) -> int:
        return len(self._by_label)

    def __repr__(self) -> str:
        return f"GroupResult({dict(self._by_label)!r})"

    @property
    def succeeded(self) -> dict[str, NodeResult]:
        return {label: r for label, r in self.items() if r.ok}

    @property
    def failed(self) -> dict[str, NodeResult]:
        return {label: r for label, r in self.items() if not r.ok}

    @property
    def ok(self) -> bool:
        return not self.failed

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {label: r.as_dict() for label, r in self.items()}
