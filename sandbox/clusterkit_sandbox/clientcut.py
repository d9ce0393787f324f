"""`clusterkit sandbox cut-client`: the client's own network drops for a while. Until the
time it writes in the state dir (``clusterkit.sandboxmode.CLIENT_CUT_FILE``), every SSH
connection a clusterkit process of this sandbox has or opens to the nodes fails as with
no network (``clusterkit.remote.connect``: a connection dialled, a read, a write); the
nodes, their connections to each other and the AWS endpoint are untouched. The product
honours the file in sandbox mode only (``sandboxmode.client_cut``)."""

from __future__ import annotations

import time
from typing import Any

from clusterkit.sandboxmode import CLIENT_CUT_FILE
from clusterkit_sandbox.imds import iso
from clusterkit_sandbox.state import running_state, state_dir, write_json


def do_cut_client(directory: str | None, *, seconds: float) -> dict[str, Any]:
    """Cut this sandbox's clients off the nodes for ``seconds`` from now (0: no longer);
    ValueError when the sandbox does not run or ``seconds`` is negative."""
    where = state_dir(directory)
    if seconds < 0:
        raise ValueError(f"--for {seconds}: not a length of time")
    if running_state(where) is None:
        raise ValueError(f"the sandbox in {where} is not running")
    until = time.time() + seconds
    write_json(where / CLIENT_CUT_FILE, {"until": until})
    return {"state": "cut" if seconds else "healed", "until": iso(until)}
