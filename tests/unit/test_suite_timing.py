"""The suite itself: no test depends on how fast this machine is. A test asserts an
order, an outcome or a comparison between measured things, never a time, a rate or a
CPU share against a fixed number (those belong in bench/); and no test sleeps a fixed
while to let something happen (it polls for the condition). Injected clocks are fine:
their time is the test's own. The before-stop hook in ../shared/hooks checks the same
on a change; this checks the whole tree."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
CLOCK_CALLS = {"time", "monotonic", "perf_counter"}
# names that hold a duration, or a figure that depends on the machine's speed or load
MEASURED = re.compile(r"(elapsed|took|duration|wall|wall_s|cpu|cpu_mean|samples_per_s|rate|"
                      r"rates|per_s)$")
# an injected clock's time is the test's own
INJECTED = re.compile(r"clock|fake", re.I)
LONGEST_FIXED_SLEEP = 0.3  # a poll's interval is shorter; a fixed wait is longer


def _number(node: ast.AST) -> float | None:
    """The value of a numeric literal (or of arithmetic on literals)."""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _is_wall_clock(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "time"
            and node.func.attr in CLOCK_CALLS)


def _words(node: ast.AST) -> list[str]:
    """The names, attributes and string keys an expression reads."""
    found = []
    for part in ast.walk(node):
        if isinstance(part, ast.Name):
            found.append(part.id)
        elif isinstance(part, ast.Attribute):
            found.append(part.attr)
        elif isinstance(part, ast.Constant) and isinstance(part.value, str):
            found.append(part.value)
    return found


def _bound(assertion: ast.Assert) -> dict[str, ast.AST]:
    """Names the assertion's comprehensions bind -> what they iterate over."""
    return {target.id: part.iter for part in ast.walk(assertion)
            if isinstance(part, ast.comprehension)
            for target in ast.walk(part.target) if isinstance(target, ast.Name)}


def _measured(node: ast.AST, bound: dict[str, ast.AST]) -> bool:
    words = _words(node)
    words += [w for name in words if name in bound for w in _words(bound[name])]
    if any(INJECTED.search(w) for w in words):
        return False
    return (any(_is_wall_clock(part) for part in ast.walk(node))
            or any(MEASURED.search(w) for w in words))


def _timed_assertions(tree: ast.AST) -> list[int]:
    """Lines of asserts comparing a measured figure with a fixed non-zero number."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in ast.walk(node.test):
            if not isinstance(compare, ast.Compare) or not any(
                    isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE)) for op in compare.ops):
                continue
            sides = [compare.left, *compare.comparators]
            numbers = [_number(side) for side in sides]
            if any(n not in (None, 0) for n in numbers) and any(
                    n is None and _measured(side, _bound(node))
                    for side, n in zip(sides, numbers, strict=True)):
                lines.append(node.lineno)
                break
    return lines


def _fixed_sleeps(tree: ast.AST) -> list[int]:
    """Lines of time.sleep(N >= LONGEST_FIXED_SLEEP) outside a loop (a loop polls)."""
    in_loops = {id(inner) for loop in ast.walk(tree) if isinstance(loop, (ast.For, ast.While))
                for inner in ast.walk(loop)}
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sleep" and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "time" and node.args and id(node) not in in_loops
            and (_number(node.args[0]) or 0) >= LONGEST_FIXED_SLEEP]


TEST_FILES = sorted(TESTS.rglob("*.py"))


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_asserts_a_time_a_rate_or_a_cpu_share_against_a_fixed_number(path: Path):
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    found = [f"{path.name}:{n}: {lines[n - 1].strip()}" for n in _timed_assertions(tree)]
    assert not found, "compare with an order, an outcome or another node instead:\n" + \
        "\n".join(found)


@pytest.mark.parametrize("path", TEST_FILES, ids=lambda p: str(p.relative_to(TESTS)))
def test_no_test_sleeps_a_fixed_while_for_something_to_happen(path: Path):
    tree = ast.parse(path.read_text())
    lines = path.read_text().splitlines()
    found = [f"{path.name}:{n}: {lines[n - 1].strip()}" for n in _fixed_sleeps(tree)]
    assert not found, "poll for the condition (support.wait_for) instead:\n" + "\n".join(found)


@pytest.mark.parametrize("source, timed", [
    ("assert took < 60", True),
    ("assert time.monotonic() - start < 0.5", True),
    ('assert s["job_cpu"] > 0.5', True),
    ("assert all(100 < r < 2000 for r in rates)", True),
    ('assert busy >= 4 * idle["job_cpu"]', False),  # a comparison between nodes
    ("assert took > 0", False),
    ("assert all(n.wall_s > 5 for n in nodes)", True),
    ("assert fake_clock.now >= 10", False),  # an injected clock
    ("assert len(rows) < 3", False),
])
def test_the_check_tells_a_timed_assertion_from_an_order(source: str, timed: bool):
    assert bool(_timed_assertions(ast.parse(source))) is timed


@pytest.mark.parametrize("source, fixed", [
    ("time.sleep(2)", True),
    ("time.sleep(0.05)", False),
    ("while not done():\n    time.sleep(2)", False),
])
def test_the_check_tells_a_fixed_sleep_from_a_poll(source: str, fixed: bool):
    assert bool(_fixed_sleeps(ast.parse(source))) is fixed
