"""What the sandbox hands its clients: ``mode.json`` in the state dir, the configuration
that sandbox mode is (clusterkit imports nothing of this package; its
``clusterkit.sandboxmode`` reads the file, checks it and sets the environment from it).

The daemon writes it once its endpoint listens and before ``state.json`` (which
``sandbox start`` waits for), so a client that finds the sandbox started finds its
configuration too; ``stop`` (and the daemon at its end) removes it with the other state
files. It names the daemon (pid and a word of its command line: a client trusts the
file only while that process lives), the AWS endpoint, the address map (here, and
where the nodes see it), each instance's metadata URL, the SSH source the nodes'
rule allows, a timed sandbox's scale, and where this start's credentials are
(``credentials.py``: the files' names only, never a key)."""

from __future__ import annotations

from pathlib import Path

from clusterkit.sandboxmode import INSTANCE_ID, Mode
from clusterkit_sandbox.credentials import CONFIG_FILE, CREDENTIALS_FILE, auth_dir
from clusterkit_sandbox.imds import instance_url
from clusterkit_sandbox.node import VIEW_IN_NODE
from clusterkit_sandbox.state import ADDRESSES_FILE, DAEMON_MODULE, MODE_FILE, write_json
from clusterkit_sandbox.timings import Timings

CALLER_CIDR = "127.0.0.1/32"  # clients and nodes are this machine: no public-IP lookup


def mode(where: Path, endpoint: str, pid: int, timings: Timings,
         files: tuple[Path, Path] | None = None) -> Mode:
    """Sandbox mode for the daemon ``pid`` of the state dir ``where``, serving AWS at
    ``endpoint``, its credentials and config files ``files`` (default: where
    ``credentials.write`` puts them)."""
    creds, config = files or (auth_dir(where) / CREDENTIALS_FILE, auth_dir(where) / CONFIG_FILE)
    return Mode(pid=pid, daemon=DAEMON_MODULE, endpoint=endpoint,
                address_map=str(where / ADDRESSES_FILE),
                node_address_map=f"{VIEW_IN_NODE}/{ADDRESSES_FILE}",
                metadata_url=instance_url(endpoint, INSTANCE_ID), caller_cidr=CALLER_CIDR,
                credentials_file=str(creds), config_file=str(config),
                time_scale=timings.scale if timings.on else None)


def hand_over(where: Path, endpoint: str, pid: int, timings: Timings,
              files: tuple[Path, Path] | None = None) -> None:
    """Write ``mode.json`` (whole, or not at all)."""
    write_json(where / MODE_FILE, mode(where, endpoint, pid, timings, files).to_json())
