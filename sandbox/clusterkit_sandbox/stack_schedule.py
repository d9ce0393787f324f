"""When CloudFormation would create (or delete) each resource of a stack: every resource
starts once the resources it refers to are done (``Ref``, ``Fn::GetAtt``, ``Fn::Sub``'s
``${X}``, ``DependsOn``), independent ones at once, as CloudFormation does; deletion runs
the other way round (a resource goes once everything referring to it is gone). The
stack is in progress for the longest chain: its critical path.

PURE: a template's ``Resources`` (as moto parses it: ``!Ref`` is ``{"Ref": ...}``) and
a figure per resource type in, the schedule out."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

SUB_NAME = re.compile(r"\$\{([A-Za-z0-9:]+)(?:\.[A-Za-z0-9.]+)?\}")


@dataclass(frozen=True)
class Step:
    """One resource's part: ``start`` and ``end`` in seconds after the stack call."""

    logical_id: str
    resource_type: str
    start: float
    end: float


def references(node: Any, condition: Callable[[str], bool] = lambda _c: True) -> set[str]:
    """Names ``node`` refers to; of an ``Fn::If`` only the branch ``condition`` picks."""
    found: set[str] = set()
    if isinstance(node, list):
        for item in node:
            found |= references(item, condition)
    elif isinstance(node, dict):
        for key, value in node.items():
            found |= _reference(key, value, condition)
    return found


def _reference(key: str, value: Any, condition: Callable[[str], bool]) -> set[str]:
    if key == "Ref" and isinstance(value, str):
        return {value}
    if key == "Fn::GetAtt":
        name = value[0] if isinstance(value, list) and value else str(value).split(".")[0]
        return {name}
    if key == "Fn::Sub":
        text, names = (value[0], value[1:]) if isinstance(value, list) else (value, [])
        return set(SUB_NAME.findall(str(text))) | references(names, condition)
    if key == "Fn::If" and isinstance(value, list) and len(value) == 3:
        return references(value[1] if condition(value[0]) else value[2], condition)
    return references(value, condition)


def dependencies(resources: Mapping[str, Mapping[str, Any]],
                 condition: Callable[[str], bool] = lambda _c: True) -> dict[str, set[str]]:
    """Logical id -> the ids of ``resources`` it needs first (references to parameters,
    pseudo parameters and resources left out are not dependencies)."""
    needs: dict[str, set[str]] = {}
    for name, body in resources.items():
        depends = body.get("DependsOn", [])
        named = {depends} if isinstance(depends, str) else set(depends)
        found = named | references(body.get("Properties", {}), condition)
        needs[name] = {other for other in found if other in resources and other != name}
    return needs


def _order(needs: Mapping[str, set[str]]) -> list[str]:
    """Ids with each after what it needs (template order among equals); a cycle, which
    CloudFormation refuses, is broken where it is met."""
    done: list[str] = []
    seen: set[str] = set()

    def visit(name: str, path: frozenset[str]) -> None:
        if name in seen or name in path:
            return
        for other in sorted(needs[name]):
            visit(other, path | {name})
        seen.add(name)
        done.append(name)

    for name in needs:
        visit(name, frozenset())
    return done


def _schedule(resources: Mapping[str, Mapping[str, Any]], after: Mapping[str, set[str]],
              seconds: Callable[[str], float]) -> list[Step]:
    ends: dict[str, float] = {}
    steps = []
    for name in _order(after):
        start = max((ends[n] for n in after[name] if n in ends), default=0.0)
        kind = str(resources[name].get("Type", ""))
        ends[name] = start + seconds(kind)
        steps.append(Step(name, kind, start, ends[name]))
    return steps


def create_schedule(resources: Mapping[str, Mapping[str, Any]],
                    seconds: Callable[[str], float],
                    condition: Callable[[str], bool] = lambda _c: True) -> list[Step]:
    """Each resource from when all it needs are created, for ``seconds(its type)``; in
    an order where what a resource needs comes first."""
    return _schedule(resources, dependencies(resources, condition), seconds)


def delete_schedule(resources: Mapping[str, Mapping[str, Any]],
                    seconds: Callable[[str], float],
                    condition: Callable[[str], bool] = lambda _c: True) -> list[Step]:
    """Each resource from when everything that needs it is deleted, for
    ``seconds(its type)``; in an order where dependents come first."""
    needs = dependencies(resources, condition)
    needed_by: dict[str, set[str]] = {name: set() for name in needs}
    for name, wanted in needs.items():
        for other in wanted:
            needed_by[other].add(name)
    return _schedule(resources, needed_by, seconds)


def critical_path(steps: list[Step]) -> float:
    """Seconds the whole schedule takes."""
    return max((step.end for step in steps), default=0.0)
