"""A tar of files made in memory, for a node's stdin (``tar -x`` there): each file's name,
bytes and mode, nothing else of this machine (no owner, no time)."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Iterable


def tar_bytes(entries: Iterable[tuple[str, bytes, int]]) -> bytes:
    """(name, data, mode) of each file -> the tar's bytes."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data, mode in entries:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()
