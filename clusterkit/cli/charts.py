"""What every chart clusterkit draws shares: matplotlib (the `charts` extra) loaded only
when a chart is drawn, with a clear error naming the extra when it is missing; a figure
of a size in pixels; and the file written whole or not at all, PNG or SVG by its suffix."""

from __future__ import annotations

import io
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from clusterkit.errors import ClusterkitError, UsageError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = {".png": "png", ".svg": "svg"}  # a chart file's suffix -> what is written
DPI = 100
EXTRA_HINT = ("install the charts extra: `pip install 'clusterkit[charts]'` "
              "(scripts/install.sh installs it)")


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def require() -> None:
    """ClusterkitError (exit 1) naming the extra when matplotlib is not installed: a
    command that draws calls it before it does anything else."""
    if not available():
        raise ClusterkitError("drawing a chart needs matplotlib, which is not installed",
                              EXTRA_HINT)


def format_of(path: str | os.PathLike[str], option: str) -> str:
    """The format a chart file's suffix names; UsageError (exit 2) for any other."""
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise UsageError(f"{option} {path}: a chart is written as PNG or SVG; the file "
                         f"name must end in {' or '.join(FORMATS)}",
                         f"e.g. {option} {Path(path).with_suffix('.png').name}")
    return FORMATS[suffix]


def new_figure(width_px: int, height_px: int) -> Figure:
    """A figure of that size in pixels (at DPI), drawn off screen: no pyplot, no
    global state, no display."""
    require()
    from matplotlib.figure import Figure

    return Figure(figsize=(width_px / DPI, height_px / DPI), dpi=DPI)


def render(figure: Figure, fmt: str = "png") -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=DPI)
    return buffer.getvalue()


def save(figure: Figure, path: str | os.PathLike[str]) -> Path:
    """The figure written to ``path`` in the format its suffix names, whole or not at
    all (a temp file renamed into place), readable by all (0644)."""
    target = Path(path)
    data = render(figure, format_of(target, "chart"))
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide a chart from its readers
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
