"""Rendering of results and errors for the terminal."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from clusterkit.errors import ClusterkitError, SpecError


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def render_error(err: ClusterkitError, console: Console) -> None:
    """Message + hint, no traceback. Spec errors list every located issue."""
    if isinstance(err, SpecError):
        for issue in err.issues:
            style = "red" if issue.level == "error" else "yellow"
            console.print(f"[{style}]{escape(issue.format())}[/{style}]")
    console.print(f"[bold red]error:[/bold red] {escape(err.message)}")
    if err.hint:
        console.print(f"[dim]hint:[/dim] {escape(err.hint)}")
