"""GetConsoleOutput for the sandbox's nodes: what cloud-init's keys-to-console module
prints on a real instance (through ``logger -t ec2``), made from the node's real host
key, so `up`'s first-contact check runs in the sandbox as on AWS. An instance with no
running sandbox node gets moto's own sample boot log (no keys: `up` refuses such a node unless
--accept-new-host-key names it).

For tests, the console of an instance can be told to lie or to keep quiet:
``set_mode(dir, selector, ConsoleMode.LIE)`` records it in ``console.json`` in the state
dir, and the console of every instance the selector names (an instance id, or
``CLUSTER/INDEX``) then shows a key that is not its node's (LIE) or no keys at all, as an
image with ``emit_keys_to_console: false`` (SILENT); ``None`` makes it honest again."""

from __future__ import annotations

import base64
import hashlib
import os
from collections.abc import Callable
from enum import Enum
from pathlib import Path
from typing import Any

from clusterkit_sandbox.state import read_json, write_json

MODES_FILE = "console.json"


class ConsoleMode(Enum):
    LIE = "lie"  # another key than the node's
    SILENT = "silent"  # no keys (cloud-init finishes without printing them)

SYSLOG = "<14>Nov 26 07:00:01 ec2: "  # what util-linux logger --stderr puts before each line
ED25519 = "ssh-ed25519"

# instance id -> (host key line, hostname, cluster, node index) of its running node
NodeLookup = Callable[[str], "tuple[str, str, str, int | None] | None"]


def fingerprint(key: str) -> str:
    """``ssh-keygen -l``'s SHA256 fingerprint of a ``type base64 …`` key line."""
    digest = hashlib.sha256(base64.b64decode(key.split()[1])).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def _kind(key: str) -> str:
    return {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA"}.get(key.split()[0], "ECDSA")


def _bits(key: str) -> int:
    return 256 if not key.startswith("ssh-rsa") else 3072


def console_text(key: str | None, hostname: str) -> str:
    """A boot log whose cloud-init block shows ``key`` (``type base64``); None: no block."""
    body: list[str] = []
    if key is not None:
        pub = " ".join(key.split()[:2])
        body = [
            "", "#" * 61, "-----BEGIN SSH HOST KEY FINGERPRINTS-----",
            f"{_bits(pub)} {fingerprint(pub)} root@{hostname} ({_kind(pub)})",
            "-----END SSH HOST KEY FINGERPRINTS-----", "#" * 61,
            "-----BEGIN SSH HOST KEY KEYS-----", f"{pub} root@{hostname}",
            "-----END SSH HOST KEY KEYS-----",
        ]
    return "\n".join([
        "[    0.000000] Linux version 6.5.0-aws (clusterkit sandbox)",
        f"[    2.100000] cloud-init[560]: Cloud-init v. 23.4 running 'init' on {hostname}",
        "[  OK  ] Started OpenBSD Secure Shell server.",
        *(SYSLOG + line for line in body),
        "[    3.200000] cloud-init[900]: Cloud-init v. 23.4 finished at Thu, 26 Nov 2026 "
        "07:00:02 +0000. Datasource DataSourceEc2Local.  Up 3.20 seconds",
    ]) + "\n"


def other_key(instance_id: str) -> str:
    """A well-formed ed25519 key that is no node's: the blob of a 32-byte public key
    derived from the instance id."""
    point = hashlib.sha256(f"lie:{instance_id}".encode()).digest()
    blob = (len(ED25519).to_bytes(4, "big") + ED25519.encode()
            + len(point).to_bytes(4, "big") + point)
    return f"{ED25519} {base64.b64encode(blob).decode()}"


def modes(directory: Path) -> dict[str, ConsoleMode]:
    """{selector: mode} of the consoles told to lie or keep quiet."""
    data = read_json(directory / MODES_FILE, {})
    if not isinstance(data, dict):
        return {}
    return {str(k): ConsoleMode(v) for k, v in data.items()
            if v in {m.value for m in ConsoleMode}}


def set_mode(directory: str | os.PathLike[str], selector: str,
             mode: ConsoleMode | None) -> None:
    """Make the console of the instance(s) ``selector`` names (instance id or
    ``CLUSTER/INDEX``) lie or keep quiet, or (None) be honest again."""
    where = Path(directory)
    chosen = {k: m.value for k, m in modes(where).items() if k != selector}
    if mode is not None:
        chosen[selector] = mode.value
    write_json(where / MODES_FILE, chosen)


def output_for(directory: Path, instance_id: str, lookup: NodeLookup) -> str | None:
    """The console text of ``instance_id``, or None when it has no running node."""
    found = lookup(instance_id)
    if found is None:
        return None
    key, hostname, cluster, index = found
    chosen = modes(directory)
    mode = chosen.get(instance_id) or chosen.get(f"{cluster}/{index}")
    if mode is ConsoleMode.LIE:
        return console_text(other_key(instance_id), hostname)
    return console_text(None if mode is ConsoleMode.SILENT else key, hostname)


def install(directory: Path, lookup: NodeLookup) -> None:
    """Answer GetConsoleOutput from ``lookup`` in this process's moto EC2 responses."""
    from moto.core.responses import ActionResult
    from moto.core.types import Base64EncodedString
    from moto.core.utils import utcnow
    from moto.ec2.responses import EC2Response
    from moto.ec2.responses.general import SAMPLE_CONSOLE_OUTPUT

    def get_console_output(self: Any) -> Any:
        instance = self.ec2_backend.get_instance(self._get_param("InstanceId"))
        text = output_for(directory, instance.id, lookup)
        return ActionResult({"InstanceId": instance.id, "Timestamp": utcnow(),
                             "Output": Base64EncodedString.from_raw_string(
                                 SAMPLE_CONSOLE_OUTPUT if text is None else text)})

    EC2Response.get_console_output = get_console_output
