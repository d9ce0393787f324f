"""What an instance's console output says about its SSH host keys, and whether the key a
node presents on first contact is one of them (pure: text in, verdict out).

cloud-init's keys-to-console module prints, on every boot, through ``logger -t ec2``
(so each line may carry a syslog prefix such as ``<14>Nov 26 07:00:01 ec2: ``)::

    -----BEGIN SSH HOST KEY FINGERPRINTS-----
    256 SHA256:<43 base64 chars> root@ip-10-0-0-1 (ED25519)
    -----END SSH HOST KEY FINGERPRINTS-----
    -----BEGIN SSH HOST KEY KEYS-----
    ssh-ed25519 AAAA... root@ip-10-0-0-1
    -----END SSH HOST KEY KEYS-----

Older images print MD5 fingerprints (``2048 aa:bb:…:ff root@host (RSA)``). The console
is what the hypervisor saw the instance print, so it reaches clusterkit over the AWS API
(TLS), not over the address SSH dials: a key that matches it is the instance's own.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass
from enum import Enum

FINGERPRINTS = ("-----BEGIN SSH HOST KEY FINGERPRINTS-----",
                "-----END SSH HOST KEY FINGERPRINTS-----")
KEYS = ("-----BEGIN SSH HOST KEY KEYS-----", "-----END SSH HOST KEY KEYS-----")
FINISHED = re.compile(r"Cloud-init v\. \S+ finished at")  # nothing more will be printed

_HEX_PAIRS = r"[0-9a-f]{2}(?::[0-9a-f]{2}){15}"
_FP_LINE = re.compile(r"(?:^|\s)(\d+) (SHA256:[A-Za-z0-9+/]{43}|(?:MD5:)?" + _HEX_PAIRS
                      + r") .*\((\w+)\)\s*$")
_KEY_TYPES = ("ssh-ed25519", "ssh-rsa", "ssh-dss", "ecdsa-sha2-nistp256",
              "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com",
              "sk-ecdsa-sha2-nistp256@openssh.com")
_KEY_LINE = re.compile(r"(?:^|\s)(" + "|".join(re.escape(t) for t in _KEY_TYPES)
                       + r") (AAAA[A-Za-z0-9+/]+={0,3})(?:\s|$)")


@dataclass(frozen=True)
class Fingerprint:
    """One printed fingerprint: ``SHA256:…`` or ``MD5:aa:…``, and the key type in
    OpenSSH's words (ED25519, ECDSA, RSA, DSA)."""

    value: str
    kind: str

    def describe(self) -> str:
        return f"{self.value} ({self.kind})"


@dataclass(frozen=True)
class ConsoleKeys:
    """The host keys an instance's console output shows: the last complete fingerprint
    block and key block, and whether cloud-init said it finished (an image that prints
    no keys by then prints none)."""

    fingerprints: tuple[Fingerprint, ...] = ()
    keys: tuple[str, ...] = ()  # "type base64"
    finished: bool = False

    @property
    def printed(self) -> bool:
        return bool(self.fingerprints or self.keys)

    def all_fingerprints(self) -> tuple[Fingerprint, ...]:
        """The printed fingerprints and those of the printed keys, without repeats."""
        seen = list(self.fingerprints)
        for key in self.keys:
            fp = Fingerprint(sha256_fingerprint(key), key_kind(key))
            if fp not in seen:
                seen.append(fp)
        return tuple(seen)


class Verdict(Enum):
    MATCH = "match"  # the presented key is one the console printed
    MISMATCH = "mismatch"  # the console printed keys, and this is none of them
    UNPRINTED = "unprinted"  # no keys printed (yet): nothing to check with, not pinned


def _last_block(lines: list[str], markers: tuple[str, str]) -> list[str] | None:
    """The lines of the last block between ``markers`` that has its end line."""
    begin, end = markers
    found: list[str] | None = None
    current: list[str] | None = None
    for line in lines:
        if begin in line:
            current = []
        elif end in line and current is not None:
            found, current = current, None
        elif current is not None:
            current.append(line)
    return found


def _fingerprint(line: str) -> Fingerprint | None:
    match = _FP_LINE.search(line)
    if match is None:
        return None
    value = match.group(2)
    if not value.startswith("SHA256:") and not value.startswith("MD5:"):
        value = "MD5:" + value
    return Fingerprint(value, match.group(3).upper())


def parse(text: str) -> ConsoleKeys:
    """The host keys in console output ``text`` (any prefix before each line's content
    is skipped; lines of other programs inside a block are ignored)."""
    lines = text.replace("\r", "").split("\n")
    fp_block = _last_block(lines, FINGERPRINTS) or []
    key_block = _last_block(lines, KEYS) or []
    fps = tuple(fp for line in fp_block if (fp := _fingerprint(line)) is not None)
    keys = tuple(f"{m.group(1)} {m.group(2)}" for line in key_block
                 if (m := _KEY_LINE.search(line)) is not None)
    return ConsoleKeys(fps, keys, finished=any(FINISHED.search(line) for line in lines))


def _blob(key: str) -> bytes:
    try:
        return base64.b64decode(key.split()[1], validate=True)
    except (IndexError, binascii.Error):
        return b""


def sha256_fingerprint(key: str) -> str:
    """OpenSSH's ``SHA256:…`` fingerprint of a ``type base64`` key."""
    digest = base64.b64encode(hashlib.sha256(_blob(key)).digest()).decode()
    return "SHA256:" + digest.rstrip("=")


def md5_fingerprint(key: str) -> str:
    """OpenSSH's ``MD5:aa:bb:…`` fingerprint (what old images print)."""
    digest = hashlib.md5(_blob(key), usedforsecurity=False).hexdigest()
    return "MD5:" + ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def key_kind(key: str) -> str:
    """The key type as ``ssh-keygen -l`` names it (ED25519, ECDSA, RSA, DSA, …)."""
    name = key.split()[0] if key.split() else ""
    kinds = {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA", "ssh-dss": "DSA",
             "sk-ssh-ed25519@openssh.com": "ED25519-SK",
             "sk-ecdsa-sha2-nistp256@openssh.com": "ECDSA-SK"}
    return kinds.get(name, "ECDSA" if name.startswith("ecdsa-") else name.upper())


def verify(presented: str, console: ConsoleKeys) -> Verdict:
    """Is ``presented`` (``type base64``) a key the console printed? A printed key of any
    type counts; a key matching none of the printed ones is a mismatch."""
    if not console.printed:
        return Verdict.UNPRINTED
    blob = _blob(presented)
    if blob and any(_blob(k) == blob for k in console.keys):
        return Verdict.MATCH
    mine = {sha256_fingerprint(presented), md5_fingerprint(presented)} if blob else set()
    if any(fp.value in mine for fp in console.fingerprints):
        return Verdict.MATCH
    return Verdict.MISMATCH


def expected(presented: str, console: ConsoleKeys) -> tuple[Fingerprint, ...]:
    """The console's fingerprints to show beside a mismatching key: those of its type,
    else all of them."""
    printed = console.all_fingerprints()
    same = tuple(fp for fp in printed if fp.kind == key_kind(presented))
    return same or printed
