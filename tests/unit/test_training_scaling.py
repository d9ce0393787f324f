"""training/scaling.py's table (speedup, efficiency, $ per million samples, CSV) and
cli/scalechart.py's PNG."""

from __future__ import annotations

import csv
import io
import struct
import zlib

import pytest

from clusterkit.cli.scalechart import png
from clusterkit.training.scaling import Measure, csv_text, lines, rows

RUNS = [Measure(4, 32, 5600.0, 4 * 32.77), Measure(1, 8, 1500.0, 32.77),
        Measure(2, 16, 2900.0, 2 * 32.77)]


def test_speedup_and_efficiency_are_against_the_smallest_run():
    table = rows(RUNS)
    assert [r.nodes for r in table] == [1, 2, 4]
    assert table[0].speedup == 1.0 and table[0].efficiency == 100.0
    assert table[2].speedup == pytest.approx(5600 / 1500)
    assert table[2].efficiency == pytest.approx(100 * 5600 / 1500 / 4)
    assert table[1].usd_per_million == pytest.approx(2 * 32.77 / (2900 * 3600) * 1e6)
    text = "\n".join(lines(table))
    assert "93%" in text and "3.73" in text  # the guide's ~93% of linear at 4 nodes


def test_a_run_without_throughput_or_price_is_kept_blank():
    table = rows([Measure(1, 0, None, None), Measure(2, 0, 100.0, None)])
    assert table[0].speedup is None and table[1].speedup == 1.0  # the first that measured
    assert table[1].efficiency == pytest.approx(100.0) and table[1].usd_per_million is None
    parsed = list(csv.reader(io.StringIO(csv_text(table))))
    assert parsed[0][0] == "nodes" and parsed[1] == ["1", "0", "", "", "", ""]


def test_the_chart_is_a_valid_png():
    data = png(rows(RUNS), "c1 scaling")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 100 and height > 100
    start = data.index(b"IDAT") + 4
    length = struct.unpack(">I", data[start - 8:start - 4])[0]
    raw = zlib.decompress(data[start:start + length])
    assert len(raw) == height * (1 + 3 * width)
    assert bytes((40, 110, 200)) in raw  # the measured bars are drawn


@pytest.mark.parametrize("count", [1, 3, 12])
def test_the_chart_has_a_sensible_size_and_its_legend_inside(count: int):
    """720 x 440 however many runs (3 runs made a 252-pixel chart that cut its legend
    off); the legend's swatches and words lie inside the plot, and every run's bars are
    drawn inside the image."""
    from clusterkit.cli import scalechart

    runs = [Measure(k, 0, 1000.0 * k ** 0.9, None) for k in range(1, count + 1)]
    data = png(rows(runs), "c1 scaling")
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (scalechart.WIDTH, scalechart.HEIGHT)
    start = data.index(b"IDAT") + 4
    length = struct.unpack(">I", data[start - 8:start - 4])[0]
    raw = zlib.decompress(data[start:start + length])
    stride = 1 + 3 * width

    def at(x: int, y: int) -> bytes:
        return raw[y * stride + 1 + 3 * x:y * stride + 4 + 3 * x]

    x, y = scalechart.LEFT + 10, scalechart.TOP + 8
    assert at(x + 2, y + 2) == bytes(scalechart.IDEAL)
    assert at(x + 2, y + 18) == bytes(scalechart.MEASURED)
    words = "measured (% of linear)"
    assert x + scalechart.SWATCH + 6 + len(words) * 6 < width - scalechart.RIGHT
    measured = [i for i in range(width) if at(i, height - scalechart.BOTTOM - 1)
                == bytes(scalechart.MEASURED)]
    assert measured and max(measured) < width - scalechart.RIGHT


def test_io_only_gives_every_process_the_variable_and_adds_the_words():
    from clusterkit.cluster.jobs.scaling import IO_ONLY_ENV, io_only
    from clusterkit.spec import loads

    spec = loads("name: t\nregion: us-east-1\nnodes: {count: 2, instance_types: [c5.large]}\n"
                 "train: {command: python3 train.py, env: {A: b}}\n")
    changed, text = io_only(spec, "python3 train.py", "--test-io 1")
    assert text == "python3 train.py --test-io 1"
    assert dict(changed.train.env) == {"A": "b", IO_ONLY_ENV: "1"}
    assert dict(spec.train.env) == {"A": "b"}  # the spec itself is left as it was
