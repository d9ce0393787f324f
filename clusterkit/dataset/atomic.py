"""Output files that never look complete unless they are.

Each output is written under a temporary name in its destination directory (so the final
rename never crosses a file system), flushed and fsynced, and renamed into place only when
every file of its set is complete. Any write error becomes one ``OutputError`` naming the
file and the OS error; the caller discards the temporary files, and whatever was at the
final names before (an earlier complete dataset) is left as it was.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable
from typing import BinaryIO

from clusterkit.errors import ClusterkitError

_HINTS = {
    errno.ENOSPC: "the file system is full: free space there or write elsewhere",
    errno.EDQUOT: "the disk quota is used up: free space or write elsewhere",
    errno.EFBIG: "the file-size limit was reached (`ulimit -f`, or the file system's "
                 "largest file)",
    errno.EACCES: "no permission to write in that directory",
    errno.EPERM: "no permission to write in that directory",
    errno.EROFS: "that file system is mounted read-only",
    errno.ENOENT: "the directory does not exist: create it first",
}


class OutputError(ClusterkitError):
    """An output file could not be written. Exit code 1."""


def output_error(path: str, exc: OSError, replaced: bool = False) -> OutputError:
    """``cannot write PATH: <OS error> (ENAME)`` with a hint that says what to do and
    what was (not) touched."""
    code = errno.errorcode.get(exc.errno or 0, "")
    reason = f"{exc.strerror or exc}" + (f" ({code})" if code else "")
    fix = _HINTS.get(exc.errno or 0, "check the destination directory")
    kept = ("the new files are in place but may not survive a crash" if replaced else
            "nothing was replaced: earlier files of the same name are unchanged and the "
            "temporary files were removed")
    return OutputError(f"cannot write {path}: {reason}", f"{fix}; {kept}")


def temp_name(path: str) -> str:
    """Where ``TempOutput(path)`` writes until its commit."""
    return f"{path}.tmp-{os.getpid()}"


def remove_temp(path: str) -> None:
    """``TempOutput(path)``'s temporary file deleted, if there is one: for an interrupt
    that came between its open and the caller holding the object."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp_name(path))


class TempOutput:
    """One output file, written as ``PATH.tmp-PID`` until ``commit()``."""

    def __init__(self, path: str, buffering: int = 1 << 16) -> None:
        self.path = path
        self.tmp = temp_name(path)
        try:
            self.file: BinaryIO = open(self.tmp, "wb", buffering=buffering)  # noqa: SIM115
        except OSError as exc:
            raise output_error(path, exc) from exc
        self.done = False

    def fileno(self) -> int:
        return self.file.fileno()

    def write(self, data: bytes) -> None:
        try:
            self.file.write(data)
        except OSError as exc:
            raise output_error(self.path, exc) from exc

    def finish(self) -> None:
        """Flush, fsync and close: after this the temporary file is complete on disk."""
        if self.done:
            return
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
        except OSError as exc:
            raise output_error(self.path, exc) from exc
        self.done = True

    def commit(self) -> None:
        """Rename the finished temporary file to the final name."""
        if not self.done:
            raise RuntimeError(f"{self.path}: commit before finish")
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            raise output_error(self.path, exc) from exc

    def discard(self) -> None:
        """Close (errors ignored: the data is being thrown away) and delete the temp file."""
        with contextlib.suppress(OSError):
            self.file.close()  # closes the descriptor even when the final flush fails
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.tmp)


def sync_dirs(paths: Iterable[str]) -> None:
    """fsync the directories holding ``paths``, so their renames survive a crash."""
    for directory in sorted({os.path.dirname(os.path.abspath(p)) for p in paths}):
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOTSUP):  # fs cannot sync a directory
                raise output_error(directory, exc, replaced=True) from exc


def publish(outputs: list[TempOutput]) -> None:
    """Finish every output (a write error raises before anything is renamed), then rename
    them all into place."""
    for out in outputs:
        out.finish()
    for out in outputs:
        out.commit()
    sync_dirs(out.path for out in outputs)
