"""tests/data/node-captures: each file a verbatim copy of the one of the same name in
../shared/data/node-captures (the project's recorded real data), and its README names
each with its provenance.

``SHA256SUMS`` holds each original's digest, recorded when it was copied: every copy is
checked against it everywhere (a clean clone included, nothing skipped), and where the
originals sit beside the project (the developers' machines) they are checked against it
too, so a copy and its original can never drift apart unseen."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

COPIES = Path(__file__).parents[1] / "data" / "node-captures"
ORIGINALS = Path(__file__).resolve().parents[3] / "shared" / "data" / "node-captures"
NOT_CAPTURES = {"README.md", "SHA256SUMS"}
FILES = sorted(p for p in COPIES.rglob("*") if p.is_file() and p.name not in NOT_CAPTURES)


def recorded() -> dict[str, str]:
    """relative path -> the original's sha256, as SHA256SUMS records it"""
    lines = (COPIES / "SHA256SUMS").read_text().splitlines()
    return {name: digest for digest, name in (line.split(maxsplit=1) for line in lines)}


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_every_copy_is_listed_with_its_source():
    listed = (COPIES / "README.md").read_text()
    assert FILES
    for path in FILES:
        row = next((line for line in listed.splitlines()
                    if line.startswith(f"| `{path.relative_to(COPIES)}`")
                    or line.startswith(f"| `{path.name}`")), "")
        assert "http" in row or "git:" in row or "public document" in row, path.name


def test_the_digests_list_every_copy_and_nothing_else():
    assert sorted(recorded()) == sorted(str(p.relative_to(COPIES)) for p in FILES)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_copy_is_the_original_byte_for_byte(path: Path):
    assert digest(path) == recorded()[str(path.relative_to(COPIES))]


def test_the_originals_beside_the_project_have_the_recorded_digests():
    """Runs where ../shared is beside the project; elsewhere there is nothing to compare
    (the copies are checked against the digests above), so it checks the digest file's
    own form instead of skipping."""
    digests = recorded()
    assert all(len(d) == 64 and int(d, 16) >= 0 for d in digests.values())
    if not ORIGINALS.is_dir():
        return
    for name, want in digests.items():
        assert digest(ORIGINALS / name) == want, f"{name}: the original changed"
