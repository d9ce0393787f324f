"""Human rendering of the sandbox status."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.table import Table


def render_status(status: dict[str, Any], console: Console, verb: str = "") -> None:
    if not status["running"]:
        console.print(f"sandbox not running (state dir {status['dir']})")
        return
    head = f"sandbox {verb}: " if verb else "sandbox: "
    console.print(f"{head}AWS endpoint {status['endpoint']} (pid {status['pid']}, "
                  f"state dir {status['dir']})")
    console.print("use it: clusterkit --sandbox ...  or  export CLUSTERKIT_SANDBOX=1")
    for note in status.get("capabilities", {}).get("not_emulated", []):
        console.print(f"[yellow]note:[/yellow] {note}")
    if not status["nodes"]:
        console.print("nodes: none (instances tagged clusterkit:cluster become nodes)")
        return
    table = Table("instance", "cluster", "address", "hostname", "state", box=None)
    for node in status["nodes"]:
        table.add_row(node["instance_id"], node["cluster"], node["address"], node["hostname"],
                      node["state"])
    console.print(table)
