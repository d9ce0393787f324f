"""tests/scheduling.py: the suite's work units go out longest first; a unit's own order
is kept; the durations file is read back from a run's ``--durations`` lines."""

from __future__ import annotations

from pathlib import Path

from tests import scheduling


def unit_of(nodeid: str) -> str:  # tests/e2e/test_grouped.py is one unit, as conftest says
    module = nodeid.split("::", 1)[0]
    return module if module.endswith("grouped.py") else nodeid


def test_the_longest_unit_goes_first_and_a_units_tests_keep_their_order():
    ids = ["tests/unit/test_a.py::test_1", "tests/e2e/test_grouped.py::test_b",
           "tests/integration/test_c.py::test_slow", "tests/e2e/test_grouped.py::test_a",
           "tests/unit/test_a.py::test_2"]
    known = {"tests/integration/test_c.py::test_slow": 50.0}
    assert scheduling.longest_first(ids, unit_of, known) == [
        "tests/integration/test_c.py::test_slow",  # 50 s, from the file
        "tests/e2e/test_grouped.py::test_b", "tests/e2e/test_grouped.py::test_a",  # e2e: 20
        "tests/unit/test_a.py::test_1", "tests/unit/test_a.py::test_2"]  # unit: 0.1, kept


def test_the_file_is_summed_per_unit_from_the_durations_lines():
    log = ["============ slowest durations ============",
           "12.50s call     tests/e2e/test_grouped.py::test_b",
           "3.00s setup    tests/e2e/test_grouped.py::test_a",
           "0.40s call     tests/unit/test_a.py::test_1",
           "2.00s teardown tests/integration/test_c.py::test_slow[x-1]",
           "3792 passed in 800.00s"]
    assert scheduling.from_log(log, unit_of) == {
        "tests/e2e/test_grouped.py": 15.5, "tests/integration/test_c.py::test_slow[x-1]": 2.0}


def test_a_missing_or_broken_file_only_loses_the_order(tmp_path: Path):
    assert scheduling.load(tmp_path / "absent.json") == {}
    (tmp_path / "bad.json").write_text("[1, 2")
    assert scheduling.load(tmp_path / "bad.json") == {}
    assert scheduling.expected("tests/e2e/test_x.py::t", {}) == scheduling.TYPICAL["tests/e2e/"]


def test_the_kept_file_is_one_the_run_reads():
    known = scheduling.load()
    assert known and all(s >= scheduling.KEEP_ABOVE for s in known.values())
    assert all(unit.startswith("tests/") for unit in known)
