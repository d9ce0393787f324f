"""A tiny raster: filled rectangles and 5x7 text on an RGB canvas, written as a PNG
(zlib, no imaging library), for the charts clusterkit draws (cli/timeline.py).

The font is the classic 5x7 LCD glyph set (printable ASCII; anything else draws as
``?``): each glyph five column bytes, bit 0 at the top."""

from __future__ import annotations

import struct
import zlib

Color = tuple[int, int, int]

GLYPH_W, GLYPH_H = 5, 7
ADVANCE = GLYPH_W + 1  # one blank column between characters
_FONT = (
    "0000000000 00005f0000 0007000700 147f147f14 242a7f2a12 2313086462 3649552250 "
    "0005030000 001c224100 0041221c00 082a1c2a08 08083e0808 0050300000 0808080808 "
    "0060600000 2010080402 3e5149453e 00427f4000 4261514946 2141454b31 1814127f10 "
    "2745454539 3c4a494930 0171090503 3649494936 064949291e 0036360000 0056360000 "
    "0814224100 1414141414 0041221408 0201510906 324979413e 7e1111117e 7f49494936 "
    "3e41414122 7f4141221c 7f49494941 7f09090101 3e41415132 7f0808087f 00417f4100 "
    "2040413f01 7f08142241 7f40404040 7f0204027f 7f0408107f 3e4141413e 7f09090906 "
    "3e4151215e 7f09192946 4649494931 01017f0101 3f4040403f 1f2040201f 7f2018207f "
    "6314081463 0304780403 6151494543 007f414100 0204081020 0041417f00 0402010204 "
    "4040404040 0001020400 2054545478 7f48444438 3844444420 384444487f 3854545418 "
    "087e090102 081454543c 7f08040478 00447d4000 2040443d00 007f102844 00417f4000 "
    "7c04180478 7c08040478 3844444438 7c14141408 081414187c 7c08040408 4854545420 "
    "043f444020 3c4040207c 1c2040201c 3c4030403c 4428102844 0c5050503c 4464544c44 "
    "0008364100 00007f0000 0041360800 0804081008"
)


def _glyphs() -> dict[str, bytes]:
    words = _FONT.replace(" ", "")
    assert len(words) == 95 * 10, "the font table is 95 glyphs of 5 column bytes"
    return {chr(32 + k): bytes.fromhex(words[10 * k:10 * k + 10]) for k in range(95)}


GLYPHS = _glyphs()


def text_width(text: str, scale: int = 1) -> int:
    return len(text) * ADVANCE * scale


class Canvas:
    """An RGB image, (0, 0) at the top left; drawing outside it is cut off."""

    def __init__(self, width: int, height: int, background: Color = (255, 255, 255)) -> None:
        if width <= 0 or height <= 0:
            raise ValueError(f"a canvas needs a size, not {width}x{height}")
        self.width, self.height = width, height
        self.pixels = bytearray(bytes(background) * (width * height))

    def rect(self, x: int, y: int, w: int, h: int, color: Color) -> None:
        """A filled rectangle of ``w`` x ``h`` pixels from (x, y)."""
        x0, y0 = max(x, 0), max(y, 0)
        x1, y1 = min(x + w, self.width), min(y + h, self.height)
        if x1 <= x0 or y1 <= y0:
            return
        run = bytes(color) * (x1 - x0)
        for row in range(y0, y1):
            at = 3 * (row * self.width + x0)
            self.pixels[at:at + len(run)] = run

    def text(self, x: int, y: int, text: str, color: Color = (0, 0, 0), scale: int = 1) -> int:
        """``text`` with its top left at (x, y); returns the x after it."""
        for ch in text:
            glyph = GLYPHS.get(ch, GLYPHS["?"])
            for col, bits in enumerate(glyph):
                for row in range(GLYPH_H):
                    if bits >> row & 1:
                        self.rect(x + col * scale, y + row * scale, scale, scale, color)
            x += ADVANCE * scale
        return x

    def png(self) -> bytes:
        """The canvas as a PNG file (8-bit RGB, no filter, zlib)."""
        stride = 3 * self.width
        raw = b"".join(b"\0" + bytes(self.pixels[r * stride:(r + 1) * stride])
                       for r in range(self.height))
        header = struct.pack(">IIBBBBB", self.width, self.height, 8, 2, 0, 0, 0)
        return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
                + _chunk(b"IDAT", zlib.compress(raw, 9)) + _chunk(b"IEND", b""))


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (struct.pack(">I", len(data)) + kind + data
            + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
