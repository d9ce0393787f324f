"""training/scaling.py's table (speedup, efficiency, $ per million samples, CSV) and
cli/scalechart.py's chart."""

from __future__ import annotations

import csv
import io

import pytest

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


def test_the_chart_is_a_png_of_ideal_and_measured_bars(tmp_path):
    from clusterkit.cli import scalechart
    from tests.unit.test_cli_timeline import png_size

    written = scalechart.write(tmp_path / "s.png", rows(RUNS), "c1 scaling")
    assert png_size(written.read_bytes()) == (scalechart.WIDTH, scalechart.HEIGHT)
    ax = scalechart.figure(rows(RUNS), "c1 scaling").axes[0]
    ideal, measured = ax.containers
    assert [p.get_height() for p in ideal] == [1.0, 2.0, 4.0]
    assert [p.get_height() for p in measured] == pytest.approx([1.0, 2900 / 1500, 5600 / 1500])
    assert [t.get_text() for t in ax.texts] == ["1.00x 100%", "1.93x 97%", "3.73x 93%"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4"]


@pytest.mark.parametrize("count", [1, 3, 12])
def test_the_chart_has_a_sensible_size_and_its_legend_inside(count: int):
    """720 x 440 however many runs (3 runs once made a 252-pixel chart that cut its
    legend off); the legend lies inside the plot, and every run's bars inside the
    image."""
    from clusterkit.cli import scalechart

    runs = [Measure(k, 0, 1000.0 * k ** 0.9, None) for k in range(1, count + 1)]
    fig = scalechart.figure(rows(runs), "c1 scaling")
    assert tuple(fig.get_size_inches() * fig.dpi) == pytest.approx((scalechart.WIDTH,
                                                                   scalechart.HEIGHT))
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    renderer = FigureCanvasAgg(fig).get_renderer()
    ax = fig.axes[0]
    plot = ax.get_window_extent(renderer)
    legend = ax.get_legend().get_window_extent(renderer)
    assert plot.x0 <= legend.x0 and legend.x1 <= plot.x1
    assert plot.y0 <= legend.y0 and legend.y1 <= plot.y1
    for bars in ax.containers:
        assert len(bars) == count
        for bar in bars:
            box = bar.get_window_extent(renderer)
            assert box.x0 >= 0 and box.x1 <= scalechart.WIDTH and box.y1 <= plot.y1


def test_io_only_gives_every_process_the_variable_and_adds_the_words():
    from clusterkit.cluster.jobs.scaling import IO_ONLY_ENV, io_only
    from clusterkit.spec import loads

    spec = loads("name: t\nregion: us-east-1\nnodes: {count: 2, instance_types: [c5.large]}\n"
                 "train: {command: python3 train.py, env: {A: b}}\n")
    changed, text = io_only(spec, "python3 train.py", "--test-io 1")
    assert text == "python3 train.py --test-io 1"
    assert dict(changed.train.env) == {"A": "b", IO_ONLY_ENV: "1"}
    assert dict(spec.train.env) == {"A": "b"}  # the spec itself is left as it was
