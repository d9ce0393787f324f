"""The node-fact type: a shell command, a pure parser of its output and a default
(pyinfra's ``FactBase``). PURE. Its own module so that fact modules other than
``facts.py`` (``efa_facts.py``) can define facts that ``facts.ALL`` registers."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

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


@dataclass(frozen=True)
class NodeFacts:
    """The parsed facts of one node, by fact name (``facts.from_outputs`` parses them);
    ``get`` of a fact not gathered raises. Here, not in ``facts.py``, so the fact modules
    that ``facts.ALL`` registers (``efa_facts.py``) can read it without a cycle."""

    values: Mapping[str, Any] = field(default_factory=dict)

    def get(self, fact: NodeFact[T]) -> T:
        if fact.name not in self.values:
            raise FactNotGathered(fact.name)
        return self.values[fact.name]
