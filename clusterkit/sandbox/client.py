"""Client side of the sandbox: point AWS calls at the local endpoint."""

from __future__ import annotations

from rich.console import Console

from clusterkit.errors import SandboxError


def enter_sandbox_mode(console: Console) -> None:
    """Set AWS_ENDPOINT_URL and throwaway credentials for the running sandbox."""
    raise SandboxError("the sandbox is not yet available in this version")
