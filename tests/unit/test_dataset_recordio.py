"""clusterkit's own RecordIO framing (no MXNet): layout, magic splitting, atomic writer."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusterkit.dataset.recordio import (
    MAGIC,
    MAGIC_BYTES,
    IndexedRecordWriter,
    RecordTooLarge,
    decode_records,
    encode_record,
    frame_record,
    pack_header,
    read_index,
    read_records,
    unpack_header,
)


def words(data: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(data) // 4}I", data))


def test_plain_record_is_magic_length_payload_padding() -> None:
    rec = encode_record(b"abcde")
    assert rec == MAGIC_BYTES + struct.pack("<I", 5) + b"abcde\0\0\0"
    assert len(encode_record(b"abcd")) == 12


def test_aligned_magic_splits_into_start_middle_end_parts() -> None:
    payload = b"AAAA" + MAGIC_BYTES + b"BBBB" + MAGIC_BYTES + b"CC"
    rec = encode_record(payload)
    w = words(rec[:8])
    assert w == [MAGIC, (1 << 29) | 4]
    assert rec[8:12] == b"AAAA"
    assert words(rec[12:20]) == [MAGIC, (2 << 29) | 4]
    assert rec[20:24] == b"BBBB"
    assert words(rec[24:32]) == [MAGIC, (3 << 29) | 2]
    assert rec[32:] == b"CC\0\0"
    assert [p for _, p in decode_records(rec)] == [payload]


def test_magic_at_start_and_end_gives_empty_parts() -> None:
    payload = MAGIC_BYTES + MAGIC_BYTES
    rec = encode_record(payload)
    assert words(rec) == [MAGIC, 1 << 29, MAGIC, 2 << 29, MAGIC, 3 << 29]
    assert [p for _, p in decode_records(rec)] == [payload]


def test_unaligned_magic_is_not_split() -> None:
    payload = b"A" + MAGIC_BYTES + b"BBB"
    assert encode_record(payload)[:8] == MAGIC_BYTES + struct.pack("<I", 8)


@given(st.lists(st.one_of(st.binary(max_size=9), st.just(MAGIC_BYTES)), max_size=8))
def test_frame_record_matches_encode_record_and_round_trips(parts: list[bytes]) -> None:
    body = b"".join(parts)
    header = pack_header(1.0, 7)
    framed = b"".join(frame_record(header, body))
    assert framed == encode_record(header + body)
    assert [p for _, p in decode_records(framed)] == [header + body]


def test_pack_header_scalar_and_multi_label() -> None:
    one = pack_header(3.0, 42)
    assert len(one) == 24 and unpack_header(one + b"img") == (0, 3.0, 42, 0, b"img")
    multi = pack_header((1.0, 2.5, 4.0), 9)
    assert len(multi) == 24 + 12
    assert unpack_header(multi + b"x") == (3, (1.0, 2.5, 4.0), 9, 0, b"x")


def test_oversized_record_is_refused() -> None:
    class Huge(bytes):
        def __len__(self) -> int:
            return 1 << 29

    with pytest.raises(RecordTooLarge):
        frame_record(b"h" * 24, Huge())


def test_writer_renames_only_on_commit(tmp_path) -> None:
    rec, idx = str(tmp_path / "a.rec"), str(tmp_path / "a.idx")
    with IndexedRecordWriter(idx, rec, buffer_size=16) as w:
        w.write_idx(5, b"hello")
        w.write_framed(7, frame_record(pack_header(0.0, 7), b"x" * 100))
        assert not os.path.exists(rec) and not os.path.exists(idx)
    assert read_index(idx) == [(5, 0), (7, 16)]
    assert read_records(rec)[0] == b"hello"
    assert sorted(os.listdir(tmp_path)) == ["a.idx", "a.rec"]


def test_writer_abort_leaves_nothing(tmp_path) -> None:
    rec, idx = str(tmp_path / "a.rec"), str(tmp_path / "a.idx")
    with pytest.raises(KeyboardInterrupt), IndexedRecordWriter(idx, rec) as w:
        w.write_idx(0, b"data")
        raise KeyboardInterrupt
    assert os.listdir(tmp_path) == []


def test_decode_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="magic"):
        list(decode_records(b"\0" * 12))
    with pytest.raises(ValueError, match="truncated"):
        list(decode_records(encode_record(b"abcdefgh")[:10]))


def test_an_interrupt_while_the_writer_opens_its_index_leaves_no_temporary_file(
        tmp_path, monkeypatch: pytest.MonkeyPatch):
    """Ctrl-C after the index's temporary file is opened, before the writer holds it (a
    pack interrupted at its start left ``out.idx.tmp-PID``): neither file is left."""
    from clusterkit.dataset import recordio

    made = recordio.TempOutput

    def opened_then_interrupted(path: str, buffering: int = 1 << 16):
        out = made(path, buffering)
        if path.endswith(".idx"):
            raise KeyboardInterrupt
        return out

    monkeypatch.setattr(recordio, "TempOutput", opened_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        IndexedRecordWriter(str(tmp_path / "out.idx"), str(tmp_path / "out.rec"))
    assert os.listdir(tmp_path) == []
