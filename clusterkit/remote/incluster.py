"""Running inside the cluster: the master's recovery controller (``cluster/jobs/
controller.py``) sets ``CLUSTERKIT_CONTROLLER_KEY`` to its own private key, made on the
master and never sent anywhere. Then every node is dialled directly at its in-cluster
address (no hop through the master: it is the master), with that key, and the nodes it
launches authorize the key's public half at first boot (cloud-config user data)."""

from __future__ import annotations

import os
from pathlib import Path

CONTROLLER_KEY_ENV = "CLUSTERKIT_CONTROLLER_KEY"


def controller_key() -> str | None:
    """The controller's private key file when this process is the master's controller."""
    return os.environ.get(CONTROLLER_KEY_ENV) or None


def controller_public_keys() -> tuple[str, ...]:
    """The controller key's public line (for the nodes it launches), else nothing."""
    key = controller_key()
    if key is None:
        return ()
    return (Path(key + ".pub").read_text().strip(),)
