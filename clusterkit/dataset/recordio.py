"""MXNet RecordIO, written and read without MXNet.

Byte-compatible with dmlc-core's ``RecordIOWriter`` (what ``mx.recordio.MXIndexedRecordIO``
calls): every record is ``magic, lrec, payload, zero padding to 4 bytes``, where
``lrec = cflag << 29 | length``. A payload that holds the magic at a 4-byte-aligned offset is
cut there into parts (cflag 1 first, 2 middle, 3 last); the magic itself is dropped and the
reader puts it back between the parts.
"""

from __future__ import annotations

import contextlib
import numbers
import os
import struct
from collections.abc import Iterator, Sequence

import numpy as np

from clusterkit.dataset.atomic import TempOutput, output_error, remove_temp, sync_dirs

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
MAX_RECORD = 1 << 29
IR_FORMAT = "IfQQ"  # flag, label, id, id2: mx.recordio's image record header
IR_SIZE = struct.calcsize(IR_FORMAT)


class RecordTooLarge(ValueError):
    """RecordIO lengths have 29 bits."""


def pack_header(label: float | Sequence[float], rec_id: int, id2: int = 0) -> bytes:
    """The image-record header ``mx.recordio.pack`` writes, labels included.

    A scalar label gives flag 0; a sequence of labels gives flag = count, label 0, and the
    labels as float32 right after the 24-byte header.
    """
    if isinstance(label, numbers.Number):
        return struct.pack(IR_FORMAT, 0, label, rec_id, id2)
    labels = struct.pack(f"<{len(label)}f", *label)
    return struct.pack(IR_FORMAT, len(label), 0.0, rec_id, id2) + labels


def unpack_header(payload: bytes) -> tuple[int, float | tuple[float, ...], int, int, bytes]:
    """(flag, label(s), id, id2, image bytes) of an image record payload."""
    flag, label, rec_id, id2 = struct.unpack_from(IR_FORMAT, payload)
    body = payload[IR_SIZE:]
    if flag > 0:
        labels = struct.unpack_from(f"<{flag}f", body)
        return flag, labels, rec_id, id2, body[4 * flag:]
    return flag, label, rec_id, id2, body


def _lrec(cflag: int, length: int) -> bytes:
    return struct.pack("<II", MAGIC, (cflag << 29) | length)


def encode_record(payload: bytes | bytearray | memoryview) -> bytes:
    """The exact bytes dmlc's ``RecordIOWriter::WriteRecord`` emits for one payload."""
    size = len(payload)
    if size >= MAX_RECORD:
        raise RecordTooLarge(f"record of {size} bytes; RecordIO takes less than 2^29")
    data = bytes(payload)
    pad = b"\0" * (-size % 4)
    cut = data.find(MAGIC_BYTES)
    if cut < 0:  # the common case: no magic inside
        return _lrec(0, size) + data + pad
    parts: list[bytes] = []
    start = 0
    lower_align = size & ~3
    while 0 <= cut < lower_align:
        if cut % 4 == 0:
            parts.append(_lrec(1 if start == 0 else 2, cut - start))
            parts.append(data[start:cut])
            start = cut + 4
        cut = data.find(MAGIC_BYTES, cut + 1)
    parts.append(_lrec(3 if start else 0, size - start))
    parts.append(data[start:])
    parts.append(pad)
    return b"".join(parts)


def _has_aligned_magic(data: bytes) -> bool:
    words = np.frombuffer(data, dtype="<u4", count=len(data) // 4)
    return bool((words == MAGIC).any())  # numpy drops the GIL for the big compare


def frame_record(header: bytes, body: bytes) -> list[bytes]:
    """encode_record(header + body) as pieces to write, without copying ``body``.

    ``header`` must be a multiple of 4 bytes long (image-record headers are), so aligned
    offsets in ``body`` are aligned in the payload too.
    """
    size = len(header) + len(body)
    if size >= MAX_RECORD:
        raise RecordTooLarge(f"record of {size} bytes; RecordIO takes less than 2^29")
    if len(header) % 4 or _has_aligned_magic(header) or _has_aligned_magic(body):
        return [encode_record(header + body)]
    return [_lrec(0, size), header, body, b"\0" * (-size % 4)]


def decode_records(buf: bytes | memoryview, offset: int = 0) -> Iterator[tuple[int, bytes]]:
    """(offset, payload) of every record in ``buf`` from ``offset``, parts joined."""
    view = memoryview(buf)
    end = len(view)
    pos = offset
    while pos < end:
        start = pos
        chunks: list[bytes] = []
        while True:
            if pos + 8 > end:
                raise ValueError(f"truncated record header at byte {pos}")
            magic, lrec = struct.unpack_from("<II", view, pos)
            if magic != MAGIC:
                raise ValueError(f"bad RecordIO magic at byte {pos}")
            cflag, length = lrec >> 29, lrec & (MAX_RECORD - 1)
            body = pos + 8
            if body + length > end:
                raise ValueError(f"truncated record at byte {pos}")
            chunks.append(bytes(view[body:body + length]))
            pos = body + length + (-length % 4)
            if cflag in (0, 3):
                break
            chunks.append(MAGIC_BYTES)
        yield start, b"".join(chunks)


def read_records(path: str | os.PathLike) -> list[bytes]:
    """Every payload of a .rec file, in file order (small files: tests, tools)."""
    with open(path, "rb") as fh:
        return [payload for _, payload in decode_records(fh.read())]


def read_index(path: str | os.PathLike) -> list[tuple[int, int]]:
    """(key, offset) pairs of a .idx file."""
    pairs = []
    with open(path, encoding="ascii") as fh:
        for line in fh:
            key, off = line.split("\t")
            pairs.append((int(key), int(off)))
    return pairs


class IndexedRecordWriter:
    """Writes ``.rec`` + ``.idx`` under temporary names; ``commit()`` renames them into place.

    Until ``commit()`` nothing exists under the final names, so an interrupted or failed run
    never leaves a complete-looking pair behind; ``abort()`` (or leaving a ``with`` block on
    an exception) deletes the temporary files. Any write error raises ``OutputError`` and
    makes the writer refuse to commit: a record lost to a full disk is never papered over.
    """

    def __init__(self, idx_path: str, rec_path: str, buffer_size: int = 8 << 20) -> None:
        self.idx_path, self.rec_path = idx_path, rec_path
        self._rec = TempOutput(rec_path, buffering=0)
        try:
            self._idx = TempOutput(idx_path, buffering=1 << 16)
        except BaseException:  # an interrupt too: neither temporary file is left behind
            self._rec.discard()
            remove_temp(idx_path)
            raise
        self._buffer_size = buffer_size
        self._pieces: list[bytes] = []
        self._pending = 0
        self._pos = 0
        self._failed = False
        self.count = 0

    def tell(self) -> int:
        return self._pos

    def write_idx(self, key: int, payload: bytes) -> None:
        """Append one record and its ``key\\toffset`` index line (as ``write_idx`` does)."""
        self.write_framed(key, [encode_record(payload)])

    def write_framed(self, key: int, pieces: list[bytes]) -> None:
        """Append one record already framed by ``frame_record``/``encode_record``."""
        self._check()
        with self._failing():
            self._idx.write(b"%d\t%d\n" % (key, self._pos))
            size = sum(len(p) for p in pieces)
            self._pieces += pieces
            self._pending += size
            self._pos += size
            self.count += 1
            if self._pending >= self._buffer_size or len(self._pieces) >= 512:
                self._writev()

    @contextlib.contextmanager
    def _failing(self) -> Iterator[None]:
        """Any error inside marks the writer failed: it will never commit."""
        try:
            yield
        except BaseException:
            self._failed = True
            raise

    def flush(self) -> None:
        """Hand the gathered pieces to the kernel in one writev (no user-space copy)."""
        self._check()
        with self._failing():
            self._writev()

    def _writev(self) -> None:
        if not self._pieces:
            return
        fd = self._rec.fileno()
        pieces, self._pieces, self._pending = self._pieces, [], 0
        try:
            while pieces:
                done = os.writev(fd, pieces)
                while pieces and done >= len(pieces[0]):
                    done -= len(pieces.pop(0))
                if done:
                    pieces[0] = pieces[0][done:]
        except OSError as exc:
            raise output_error(self.rec_path, exc) from exc

    def finish(self) -> None:
        """Write out, fsync and close both temporary files (still under their temp names)."""
        self.flush()
        with self._failing():
            self._rec.finish()
            self._idx.finish()

    def commit(self) -> None:
        self.finish()
        # An .idx on disk must always describe the .rec beside it: drop the old index,
        # put the new records in place, and only then their index.
        try:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.idx_path)
        except OSError as exc:
            raise output_error(self.idx_path, exc) from exc
        self._rec.commit()
        self._idx.commit()
        sync_dirs([self.rec_path, self.idx_path])

    def abort(self) -> None:
        self._rec.discard()
        self._idx.discard()

    def _check(self) -> None:
        if self._failed:
            raise RuntimeError(f"{self.rec_path}: writer used after a failed write")

    def __enter__(self) -> IndexedRecordWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.abort()
            return
        try:
            self.commit()
        except BaseException:
            self.abort()
            raise
