"""One item -> one record: decoding, crop/resize arithmetic, bad-file detection."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from clusterkit.dataset.codec import (
    BadImage,
    CodecOptions,
    encode_image,
    header_for,
    make_record,
    truncation,
)
from clusterkit.dataset.listing import Item
from clusterkit.dataset.recordio import decode_records, unpack_header
from tests.unit.dataset_images import cmyk_jpeg, photo, write_image


def jpeg(h: int = 30, w: int = 40) -> bytes:
    return cv2.imencode(".jpg", photo(h, w, 1))[1].tobytes()


def decoded_shape(data: bytes, flag: int = -1) -> tuple[int, ...]:
    return cv2.imdecode(np.frombuffer(data, np.uint8), flag).shape


@pytest.mark.parametrize(("h", "w", "opts", "shape"), [
    (30, 40, CodecOptions(resize=20), (20, 26)),
    (40, 30, CodecOptions(resize=20), (26, 20)),
    (30, 40, CodecOptions(center_crop=True), (30, 30)),
    (50, 30, CodecOptions(center_crop=True, resize=12), (12, 12)),
    (30, 40, CodecOptions(), (30, 40)),
])
def test_crop_and_short_edge_resize(h, w, opts, shape) -> None:
    assert decoded_shape(encode_image(jpeg(h, w), opts))[:2] == shape


def test_color_modes_and_png_encoding() -> None:
    data = jpeg()
    assert decoded_shape(encode_image(data, CodecOptions(color=0))) == (30, 40)
    png = encode_image(data, CodecOptions(encoding=".png", quality=9))
    assert png[:4] == b"\x89PNG" and decoded_shape(png) == (30, 40, 3)


def test_cmyk_jpeg_is_decoded_to_bgr() -> None:
    assert decoded_shape(encode_image(cmyk_jpeg(), CodecOptions())) == (32, 48, 3)


def test_truncation_detection() -> None:
    data = jpeg()
    assert truncation(data) is None
    assert truncation(data + b"\0\0trailing") is None
    assert "JPEG" in truncation(data[: len(data) // 2])
    png = cv2.imencode(".png", photo(20, 20, 2))[1].tobytes()
    assert truncation(png) is None and "PNG" in truncation(png[:-20])
    assert truncation(b"") == "empty file"


def test_header_uses_all_labels_only_with_pack_label() -> None:
    item = Item(4, "a.jpg", (1.0, 2.0))
    assert unpack_header(header_for(item, False))[:3] == (0, 1.0, 4)
    assert unpack_header(header_for(item, True))[:3] == (2, (1.0, 2.0), 4)
    with pytest.raises(BadImage, match="header"):
        header_for(Item(-1, "a.jpg", (0.0,)), False)


def test_make_record_good_and_bad_files(tmp_path) -> None:
    root = str(tmp_path)
    write_image(f"{root}/ok.jpg", photo(30, 40, 3))
    (tmp_path / "text.jpg").write_text("not an image")
    (tmp_path / "empty.jpg").write_bytes(b"")
    (tmp_path / "cut.jpg").write_bytes(jpeg()[:200])
    record = b"".join(make_record(root, Item(1, "ok.jpg", (2.0,)), CodecOptions(resize=10)))
    [(_, payload)] = decode_records(record)
    flag, label, rid, _, img = unpack_header(payload)
    assert (flag, label, rid) == (0, 2.0, 1) and decoded_shape(img)[:2] == (10, 13)
    for name, why in [("text.jpg", "decodable"), ("empty.jpg", "empty"),
                      ("cut.jpg", "truncated"), ("missing.jpg", "No such file")]:
        for opts in (CodecOptions(), CodecOptions(pass_through=True)):
            with pytest.raises(BadImage, match=why):
                make_record(root, Item(0, name, (0.0,)), opts)


def test_pass_through_keeps_bytes(tmp_path) -> None:
    data = jpeg()
    (tmp_path / "a.jpg").write_bytes(data)
    record = b"".join(make_record(str(tmp_path), Item(0, "a.jpg", (0.0,)),
                                  CodecOptions(pass_through=True)))
    assert unpack_header(next(decode_records(record))[1])[4] == data
