"""Rendering of results and errors for the terminal."""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from clusterkit.errors import ClusterkitError, RemoteError, SpecError


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


def error_json(message: str, hint: str | None, exit_code: int,
               err: ClusterkitError | None = None) -> dict[str, Any]:
    """The JSON form of an error under --json: ``{"error", "hint", "exit_code"}`` (and a
    spec error's located ``issues``, a remote error's per-node ``results``)."""
    data: dict[str, Any] = {"error": message, "hint": hint, "exit_code": exit_code}
    if isinstance(err, SpecError):
        data["issues"] = [dataclasses.asdict(issue) for issue in err.issues]
    if isinstance(err, RemoteError) and err.results:  # partial success is never lost
        data["results"] = err.results
    return data


def print_error_json(err: ClusterkitError) -> None:
    print_json(error_json(err.message, err.hint, err.exit_code, err))
