"""Every path clusterkit keeps on a node, written here once: stdlib only, Python >= 3.8,
PURE (constants and string joins; the caller reads ``$CLUSTERKIT_ROOT`` itself).

Shipped beside the supervisor and the watchdog, sent ahead of the follower and the
observer (``bundle``), and imported by the client and the bootstrap steps, so both sides
name the same files. Every path is absolute; ``under(root, path)`` puts it below a test
root (``$CLUSTERKIT_ROOT``, as the playbooks honour it)."""

from __future__ import annotations

ROOT_ENV = "CLUSTERKIT_ROOT"  # prefixes every node path (tests), like the playbooks
STATE_DIR = "/var/lib/clusterkit"
JOBS_DIR = f"{STATE_DIR}/jobs"  # <job-id>/: job.json, state.json, logs, the supervisor
RECEIPTS_DIR = f"{STATE_DIR}/steps"  # one receipt per bootstrap step
AUTOSTOP_DIR = f"{STATE_DIR}/autostop"  # the watchdog's files, pid and log
AUTOSTOP_CONFIG = f"{STATE_DIR}/autostop.json"  # the watchdog's config (0600)
AUTOSTOP_STATE = f"{STATE_DIR}/autostop-state.json"  # the master's clock
ENVS_DIR = "/opt/clusterkit/envs"  # the training virtualenvs; current -> the one in use
EFA_PROFILE = "/etc/profile.d/clusterkit-efa.sh"  # written once per node, sourced by jobs


def under(root: str, path: str) -> str:
    """``path`` below ``root`` ("" or "/": ``path`` itself)."""
    return root.rstrip("/") + path
