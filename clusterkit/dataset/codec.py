"""One `.lst` item -> one image-record payload, the way im2rec.py's image_encode does it.

Decode (``cv2.imdecode`` of the file's bytes: the same decoder ``cv2.imread`` uses), optional
center crop, short-edge resize (``cv2.resize``, bilinear), ``cv2.imencode`` with the JPEG
quality or PNG compression level, then the 24-byte header. Every OpenCV call releases the
GIL, so a pool of threads runs this in parallel without pickling anything.

Differences from im2rec.py, on purpose: a JPEG or PNG cut short (im2rec packs libjpeg's
grey-filled remainder) and, with ``--pass-through``, an empty or undecodable file (im2rec
packs its bytes blindly) are reported as bad and skipped.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import cv2
import numpy as np

from clusterkit.dataset.listing import Item
from clusterkit.dataset.recordio import frame_record, pack_header


class BadImage(Exception):
    """This item cannot be packed; the message says why."""


@dataclass(frozen=True)
class CodecOptions:
    resize: int = 0
    center_crop: bool = False
    quality: int = 95
    encoding: str = ".jpg"
    color: int = 1
    pass_through: bool = False
    pack_label: bool = False


def header_for(item: Item, pack_label: bool) -> bytes:
    """im2rec: all labels only with --pack-label and more than one label, else the first."""
    try:
        if pack_label and len(item.labels) > 1:
            return pack_header(item.labels, item.index)
        return pack_header(item.labels[0], item.index)
    except Exception as exc:  # negative / huge index or label: struct refuses it, as in im2rec
        raise BadImage(f"cannot write record header: {exc}") from exc


def truncation(data: bytes) -> str | None:
    """Why ``data`` is an incomplete JPEG/PNG, or None. Cheap: looks at markers only."""
    if not data:
        return "empty file"
    if data[:2] == b"\xff\xd8":
        if data[-2:] == b"\xff\xd9":
            return None  # the usual ending; only odd files need the full search
        sos = data.rfind(b"\xff\xda")
        if sos < 0 or data.find(b"\xff\xd9", sos) < 0:
            return "truncated JPEG (no end-of-image marker after the last scan)"
    elif data[:8] == b"\x89PNG\r\n\x1a\n" and data.rfind(b"IEND") < 0:
        return "truncated PNG (no IEND chunk)"
    return None


def _crop_resize(img: np.ndarray, opts: CodecOptions) -> np.ndarray:
    h, w = img.shape[0], img.shape[1]
    if opts.center_crop:
        if h > w:
            margin = (h - w) // 2
            img = img[margin:margin + w, :]
        else:
            margin = (w - h) // 2
            img = img[:, margin:margin + h]
        h, w = img.shape[0], img.shape[1]
    if opts.resize:
        if h > w:
            newsize = (opts.resize, h * opts.resize // w)
        else:
            newsize = (w * opts.resize // h, opts.resize)
        img = cv2.resize(img, newsize)
    return img


def encode_image(data: bytes, opts: CodecOptions) -> bytes:
    """Decode, crop/resize and re-encode one image file's bytes."""
    img = cv2.imdecode(np.frombuffer(data, np.uint8), opts.color)
    if img is None:
        raise BadImage("not a decodable image")
    img = _crop_resize(img, opts)
    if opts.encoding.lower() == ".png":
        params = [cv2.IMWRITE_PNG_COMPRESSION, opts.quality]
    else:
        params = [cv2.IMWRITE_JPEG_QUALITY, opts.quality]
    try:
        ok, buf = cv2.imencode(opts.encoding, img, params)
    except cv2.error as exc:
        raise BadImage(f"cannot encode as {opts.encoding}: {exc.msg.strip()}") from exc
    if not ok:
        raise BadImage(f"cannot encode as {opts.encoding}")
    return buf.tobytes()


def _read(root: str, path: str) -> bytes:
    full = os.path.join(root, path)
    try:
        with open(full, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        stripped = os.path.join(root, path.strip())
        if stripped == full:
            raise
        with open(stripped, "rb") as fh:  # im2rec strips the path field of the .lst
            return fh.read()


def make_record(root: str, item: Item, opts: CodecOptions) -> list[bytes]:
    """The framed record (pieces to write, see recordio.frame_record) for one item."""
    header = header_for(item, opts.pack_label)
    try:
        data = _read(root, item.path)
    except OSError as exc:
        raise BadImage(exc.strerror or str(exc)) from exc
    problem = truncation(data)
    if problem:
        raise BadImage(problem)
    if opts.pass_through:
        if data[:2] != b"\xff\xd8" and data[:4] != b"\x89PNG" and cv2.imdecode(
                np.frombuffer(data, np.uint8), cv2.IMREAD_REDUCED_GRAYSCALE_8) is None:
            raise BadImage("not a decodable image")
        body = data
    else:
        body = encode_image(data, opts)
    try:
        return frame_record(header, body)
    except ValueError as exc:
        raise BadImage(str(exc)) from exc
