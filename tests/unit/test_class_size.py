"""No class of the product keeps more than 15 attributes of its own (issue 37): a class
that sets more in ``__init__`` holds more than one job (torch elastic's agent, process
group and watchers are apart for that reason). Read from the source, every class in
``clusterkit/``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MOST = 15


def init_attributes(cls: ast.ClassDef) -> set[str]:
    """The distinct ``self.X`` that the class's ``__init__`` stores (``self.a = ...``,
    ``self.a, self.b = ...``, ``self.a: T = ...``, ``self.a += ...``)."""
    found: set[str] = set()
    for item in cls.body:
        if not isinstance(item, ast.FunctionDef) or item.name != "__init__" \
                or not item.args.args:
            continue
        me = item.args.args[0].arg
        for node in ast.walk(item):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == me:
                found.add(node.attr)
    return found


def oversized() -> list[str]:
    found = []
    for path in sorted((ROOT / "clusterkit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                names = init_attributes(node)
                if len(names) > MOST:
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: "
                                 f"{len(names)} attributes")
    return found


def test_the_scan_sees_every_form_of_storing_an_attribute():
    source = ("class A:\n    def __init__(me, x):\n        me.a = x\n        me.b, me.c = 1, 2\n"
              "        me.d: int = 3\n        me.a += 1\n        other.e = 4\n"
              "        if x:\n            me.f = 5\n")
    [cls] = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)]
    assert init_attributes(cls) == {"a", "b", "c", "d", "f"}


def test_no_class_sets_more_than_15_attributes_in_its_init():
    assert oversized() == []
