"""tests/data/node-captures: each file a verbatim copy of the one of the same name in
../shared/data/node-captures (the project's recorded real data), and its README names
each with its provenance. The comparison runs where that folder sits beside the project
(the developers' machines); the copies are what the parser tests read everywhere."""

from __future__ import annotations

from pathlib import Path

import pytest

COPIES = Path(__file__).parents[1] / "data" / "node-captures"
ORIGINALS = Path(__file__).resolve().parents[3] / "shared" / "data" / "node-captures"
FILES = sorted(p for p in COPIES.rglob("*") if p.is_file() and p.name != "README.md")


def test_every_copy_is_listed_with_its_source():
    listed = (COPIES / "README.md").read_text()
    assert FILES
    for path in FILES:
        row = next((line for line in listed.splitlines()
                    if line.startswith(f"| `{path.relative_to(COPIES)}`")
                    or line.startswith(f"| `{path.name}`")), "")
        assert "http" in row or "git:" in row or "public document" in row, path.name


@pytest.mark.skipif(not ORIGINALS.is_dir(), reason="../shared is not beside the project")
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_copy_is_the_original_byte_for_byte(path: Path):
    assert path.read_bytes() == (ORIGINALS / path.relative_to(COPIES)).read_bytes()
