"""Issue 36 item 7: the sandbox guide's (docs/howto/sandbox.md) list of what the sandbox
does not emulate names nothing the sandbox emulates: instance metadata (its IMDSv2 paths) and spot interruptions (`sandbox
interrupt`) are rows of the "What is real" table, so they are not in that list."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).parents[2] / "docs" / "howto" / "sandbox.md"


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end, text.index(start))]


def test_what_is_not_emulated_names_nothing_the_table_says_is_real():
    text = PAGE.read_text()
    real = _section(text, "**What is real**", "**What is not emulated**")
    missing = " ".join(_section(text, "**What is not emulated**", "**AWS's own timings.**")
                       .split())
    assert "| Instance metadata |" in real and "clusterkit sandbox interrupt" in real
    not_emulated = missing.split("(Spot interruption notices")[0]  # before the aside
    assert not re.search(r"spot interruptions", not_emulated, re.IGNORECASE)
    assert "instance metadata (IMDS)" not in not_emulated
    assert "Spot interruption notices and rebalance recommendations are emulated" in missing
