"""A node's nat OUTPUT owner rules, emulated: the master's metadata fence (the recovery
controller's ``clusterkit/node/imdsfence.py`` rule) without touching this machine's
netfilter, which every node shares (nodes live in the host's network namespace).

In a node, ``iptables`` is a shim (``IPTABLES_SHIM``, placed by ``node``): as root it
keeps the rules of ``-t nat … OUTPUT`` (``-A`` adds, ``-D`` removes one, ``-C`` checks,
``-S`` lists), each a line in ``RULES_IN_NODE`` in the node's own root, its
``--uid-owner`` names as numbers; anything else says "not emulated". The sandbox's
metadata (``imds.Imds``) asks ``redirect`` of each request: when a rule for
``169.254.169.254:80`` with ``-j DNAT`` catches the calling socket's owner (``peers``),
the request goes to the rule's target (``forward``: the controller's proxy, on the
node's own loopback address) instead of the metadata, as the kernel would send it.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterkit.node.imdsfence import METADATA_ADDRESS, METADATA_PORT
from clusterkit_sandbox import noderoot
from clusterkit_sandbox.state import RUN_DIR

RULES_IN_NODE = "/var/lib/clusterkit-sandbox/iptables-nat-output"
FORWARDED_HEADERS = {"HTTP_X_AWS_EC2_METADATA_TOKEN": "X-aws-ec2-metadata-token",
                     "HTTP_X_AWS_EC2_METADATA_TOKEN_TTL_SECONDS":
                         "X-aws-ec2-metadata-token-ttl-seconds"}

IPTABLES_SHIM = f"""\
#!/bin/sh
# clusterkit sandbox: iptables -t nat ... OUTPUT only, kept in {RULES_IN_NODE}
# (the sandbox's metadata applies the owner rules there); never this machine's netfilter.
f={RULES_IN_NODE}
no() {{ echo "iptables $*: not emulated (clusterkit sandbox: -t nat -A|-D|-C|-S OUTPUT)" >&2; exit 1; }}
[ "$(id -u)" = 0 ] || {{ echo "iptables: Permission denied (you must be root)" >&2; exit 4; }}
[ "$1" = -w ] && shift
[ "$1" = -t ] && [ "$2" = nat ] || no "$@"
op=$3; [ "$4" = OUTPUT ] || [ "$op" = -S ] || no "$@"
shift 4 2>/dev/null || shift $#
line=; prev=
for a in "$@"; do
  if [ "$prev" = --uid-owner ]; then
    a=$(id -u "$a" 2>/dev/null) || {{ echo "iptables: owner \\"$a\\" unknown" >&2; exit 2; }}
  fi
  line="$line${{line:+ }}$a"; prev=$a
done
mkdir -p "${{f%/*}}"; touch "$f"
case "$op" in
  -A) printf '%s\\n' "$line" >> "$f" ;;
  -C) grep -qxF -- "$line" "$f" || exit 1 ;;
  -D) grep -qxF -- "$line" "$f" || {{ echo "iptables: Bad rule (does a matching rule exist in that chain?)." >&2; exit 1; }}
      awk -v l="$line" '!done && $0 == l {{ done = 1; next }} {{ print }}' "$f" > "$f.new" && cat "$f.new" > "$f" && rm -f "$f.new" ;;
  -S) sed 's/^/-A OUTPUT /' "$f" ;;
  *) no "$op" ;;
esac
"""


def rules_file(state_dir: Path, instance_id: str) -> Path:
    """Where this machine keeps the rules of ``instance_id``'s node."""
    node_dir = state_dir / RUN_DIR / "nodes" / instance_id
    return noderoot.fs_dir(node_dir) / RULES_IN_NODE.strip("/")


def target_of(rule: str, uid: int) -> tuple[str, int] | None:
    """The DNAT target of a rule line (as the shim keeps it) when it catches a TCP
    connection to the metadata by a socket of ``uid``; None otherwise."""
    words = rule.split()
    wanted = {"-p": "tcp", "-d": f"{METADATA_ADDRESS}/32", "--dport": str(METADATA_PORT),
              "-j": "DNAT"}
    if any(w in words[:-1] and words[words.index(w) + 1] != v for w, v in wanted.items()) \
            or not all(w in words for w in wanted) or "--to-destination" not in words[:-1]:
        return None
    for i, word in enumerate(words[:-1]):
        if word == "--uid-owner":
            negated = i > 0 and words[i - 1] == "!"
            if (words[i + 1] == str(uid)) == negated:
                return None
    address, _, port = words[words.index("--to-destination") + 1].partition(":")
    return (address, int(port)) if port.isdigit() else None


def rules(state_dir: Path, instance_id: str) -> list[str]:
    """The rules the node's shim keeps ([] without any)."""
    try:
        return rules_file(state_dir, instance_id).read_text().splitlines()
    except OSError:
        return []


def redirect(lines: list[str], uid: int) -> tuple[str, int] | None:
    """Where the first of a node's rules that catches ``uid`` sends a metadata request
    (None: the metadata itself answers)."""
    return next((t for t in (target_of(line, uid) for line in lines) if t), None)


def fence(state_dir: Path) -> Callable[[dict[str, Any], str], tuple[str, int] | None]:
    """The daemon's check of each metadata request (``Imds``): where instance ``iid``'s
    rules send its caller (``peers.caller_socket``: the socket's owner)."""
    from clusterkit_sandbox.peers import caller_socket

    def where(environ: dict[str, Any], iid: str) -> tuple[str, int] | None:
        lines = rules(state_dir, iid)
        found = caller_socket(environ) if lines else None  # the socket only for a rule
        return redirect(lines, found[0]) if found else None

    return where


def forward(target: tuple[str, int], method: str, path: str, environ: dict[str, Any],
            opener: Callable[..., Any] = urllib.request.urlopen) -> tuple[int, str]:
    """The request as the rule's target answers it (a connection it refuses: 502)."""
    headers = {name: environ[key] for key, name in FORWARDED_HEADERS.items() if key in environ}
    request = urllib.request.Request(f"http://{target[0]}:{target[1]}{path}", method=method,
                                     headers=headers, data=b"" if method == "PUT" else None)
    try:
        with opener(request, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 502, f"connection to {target[0]}:{target[1]} failed: {exc}"
