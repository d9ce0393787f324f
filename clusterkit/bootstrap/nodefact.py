"""The node-fact type: a shell command, a pure parser of its output and a default
(pyinfra's ``FactBase``). PURE. Its own module so that fact modules other than
``facts.py`` (``efa_facts.py``) can define facts that ``facts.ALL`` registers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


class FactNotGathered(KeyError):
    """A step read a fact that was not gathered (or a test forgot to stub it)."""

    def __str__(self) -> str:
        return f"node fact {self.args[0]!r} was not gathered"


@dataclass(frozen=True)
class NodeFact(Generic[T]):
    name: str
    command: str
    parser: Callable[[list[str]], T]
    default: T

    def parse(self, lines: Sequence[str] | None) -> T:
        """The parsed fact; the default when the command failed (None) or printed nothing."""
        if lines is None or not any(line.strip() for line in lines):
            return self.default
        return self.parser(list(lines))
