"""Small real test images made at test time (no binaries in the repo).

Everything is written by OpenCV, except the CMYK JPEG: OpenCV cannot write one, so
``cmyk_jpeg`` assembles a baseline 4-component Adobe JPEG by hand (one flat colour per 8x8
block: DC coefficients only, tiny Huffman tables).
"""

from __future__ import annotations

import os
import struct

import cv2
import numpy as np


def photo(h: int, w: int, seed: int, channels: int = 3) -> np.ndarray:
    """A smooth, non-trivial image (gradients plus a few shapes)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (3, 4, channels), dtype=np.uint8)
    img = cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)
    for _ in range(3):
        center = (int(rng.integers(0, w)), int(rng.integers(0, h)))
        cv2.circle(img, center, int(rng.integers(2, max(3, w // 3))),
                   tuple(int(v) for v in rng.integers(0, 255, channels)), -1)
    return img.reshape(h, w) if channels == 1 else img


def write_image(path: str, img: np.ndarray, params: list[int] | None = None) -> str:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    ext = os.path.splitext(path)[1] or ".jpg"
    ok, buf = cv2.imencode(ext if ext.lower() != ".jpeg" else ".jpg", img, params or [])
    assert ok
    with open(path, "wb") as fh:  # works for any file name, unlike cv2.imwrite
        fh.write(buf.tobytes())
    return path


def make_tree(root: str, classes: int = 3, per_class: int = 4, seed: int = 0) -> list[str]:
    """class_k/ dirs with JPEG and PNG images of mixed sizes and orientations."""
    paths = []
    for c in range(classes):
        for i in range(per_class):
            h, w = (40 + 3 * i, 30 + 5 * c) if (i + c) % 2 else (28 + 2 * c, 44 + 4 * i)
            ext = ".png" if i % 3 == 2 else ".jpg"
            img = photo(h, w, seed * 1000 + c * 100 + i)
            paths.append(write_image(os.path.join(root, f"class_{c}", f"im{i:02d}{ext}"), img))
    return paths


class _Bits:
    def __init__(self) -> None:
        self.acc, self.n, self.out = 0, 0, bytearray()

    def put(self, value: int, nbits: int) -> None:
        for k in range(nbits - 1, -1, -1):
            self.acc = (self.acc << 1) | ((value >> k) & 1)
            self.n += 1
            if self.n == 8:
                self.out.append(self.acc)
                if self.acc == 0xFF:
                    self.out.append(0)  # byte stuffing
                self.acc, self.n = 0, 0

    def flush(self) -> bytes:
        while self.n:
            self.put(1, 1)
        return bytes(self.out)


def _segment(marker: int, body: bytes) -> bytes:
    return struct.pack(">HH", marker, len(body) + 2) + body


def cmyk_jpeg(h: int = 32, w: int = 48) -> bytes:
    """A valid baseline CMYK (Adobe, 4 components) JPEG; h and w multiples of 8."""
    header = b"\xff\xd8" + _segment(0xFFEE, b"Adobe" + struct.pack(">HHHB", 100, 0, 0, 0))
    header += _segment(0xFFDB, b"\x00" + b"\x01" * 64)
    comps = b"".join(bytes([i, 0x11, 0]) for i in range(1, 5))
    header += _segment(0xFFC0, struct.pack(">BHHB", 8, h, w, 4) + comps)
    dc_counts = bytes([0, 0, 0, 12] + [0] * 12)  # categories 0..11, all 4-bit codes
    header += _segment(0xFFC4, b"\x00" + dc_counts + bytes(range(12)))
    header += _segment(0xFFC4, b"\x10" + bytes([1] + [0] * 15) + b"\x00")  # EOB = "0"
    header += _segment(0xFFDA, bytes([4]) + b"".join(bytes([i, 0]) for i in range(1, 5))
                       + bytes([0, 63, 0]))
    bits, pred = _Bits(), [0, 0, 0, 0]
    for by in range(h // 8):
        for bx in range(w // 8):
            for comp in range(4):
                value = (bx * 37 + by * 61 + comp * 50) % 256
                dc = 8 * (value - 128)
                diff, pred[comp] = dc - pred[comp], dc
                size = abs(diff).bit_length()
                bits.put(size, 4)
                bits.put(diff if diff >= 0 else diff + (1 << size) - 1, size)
                bits.put(0, 1)  # EOB: no AC coefficients
    return header + bits.flush() + b"\xff\xd9"


def exif_rotated_jpeg(img: np.ndarray, orientation: int = 6) -> bytes:
    """A JPEG carrying an EXIF orientation tag (decoders rotate it on load)."""
    ok, buf = cv2.imencode(".jpg", img)
    assert ok
    data = buf.tobytes()
    tiff = b"MM\x00\x2a\x00\x00\x00\x08" + struct.pack(">H", 1)
    tiff += struct.pack(">HHIHH", 0x0112, 3, 1, orientation, 0) + b"\x00\x00\x00\x00"
    app1 = _segment(0xFFE1, b"Exif\x00\x00" + tiff)
    return data[:2] + app1 + data[2:]
