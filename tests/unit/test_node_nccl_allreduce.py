"""node/nccl_allreduce.py, `train --nccl-test`'s script: what it prints is nccl-tests'
all_reduce_perf table, read back by training/allreduce.py.

The table helpers are checked without torch; the script itself runs with torch on CPU
(gloo), world size 1 and 2 through torchrun on localhost, with the interpreter
scripts/install.sh makes (the `torch` marker; CLUSTERKIT_TORCH_PYTHON overrides it).
No GPU was lent to this work: the nccl backend path has not run."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterkit.node import nccl_allreduce as script
from clusterkit.training import allreduce
from tests import support

SCRIPT = Path(script.__file__)


def test_sizes_double_from_8_bytes():
    assert script.sizes(8, 64) == [8, 16, 32, 64]
    assert len(script.sizes(8, 4 << 20)) == 20 and script.sizes(8, 4 << 20)[-1] == 4 << 20
    assert script.sizes(8, 4) == []


def test_bus_bandwidth_factor_is_2_n_minus_1_over_n():
    assert [script.bus_factor(n) for n in (1, 2, 4, 16)] == [0.0, 1.0, 1.5, 1.875]


def made_up_table(ranks: int) -> list[str]:
    """The script's lines for two sizes with made-up timings (1 ms and 4 ms per call)."""
    hosts = [(100 + r, f"node{r}", 0, "0x10", "NVIDIA A100-SXM4-40GB") for r in range(ranks)]
    rows = [script.row(size, ranks, [(seconds, 0), (seconds, 0)])
            for size, seconds in ((1 << 20, 1e-3), (128 << 20, 4e-3))]
    return [*script.header(8, 128 << 20, 5, 20, "nccl", hosts), *rows,
            *script.footer([1.0, 2.0], 0)]


def test_the_table_reads_back_as_all_reduce_perf():
    result = allreduce.parse_all_reduce(made_up_table(4))
    assert result.header == allreduce.PerfHeader(1, 1, 8, 128 << 20)
    assert [r.host for r in result.ranks] == ["node0", "node1", "node2", "node3"]
    assert result.ranks[0] == allreduce.Rank(0, 0, 100, "node0", 0, "0x10",
                                             "NVIDIA A100-SXM4-40GB")
    small, big = result.rows
    assert (big.size_bytes, big.count, big.dtype, big.redop, big.root) == \
        (128 << 20, 32 << 20, "float", "sum", -1)
    # 128 MiB in 4 ms: 33.55 GB/s algorithm bandwidth, x 2(4-1)/4 on the bus
    assert big.out_of_place == allreduce.Timing(4000.0, 33.55, 50.33, "0")
    assert big.in_place == big.out_of_place and small.busbw_gbs == 1.57
    assert result.avg_busbw_gbs == 1.5 and result.out_of_bounds == 0
    verdict = allreduce.bandwidth_verdict(result, 400.0)  # p4d.24xlarge's EFA
    assert verdict.looks is allreduce.Looks.EFA and verdict.peak_busbw_gbs == 50.33


def test_times_and_wrong_counts_are_printed_as_nccl_tests_prints_them():
    line = script.row(1 << 30, 2, [(0.536774, 0), (0.541545, 3)])
    assert line.split() == ["1073741824", "268435456", "float", "sum", "-1", "536774",
                            "2.00", "2.00", "0", "541545", "1.98", "1.98", "3"]
    assert script.time_text(25.123) == "  25.12" and script.time_text(12345.6) == "12345.6"
    assert script.footer([], 2)[0] == "# Out of bounds values : 2 FAILED"


def torchrun(tmp_path: Path, ranks: int, *args: str) -> str:
    """The script under torchrun on localhost (``ranks`` processes, gloo): its output."""
    env = {"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo",
           "HOME": str(tmp_path)}
    proc = subprocess.run([support.torch_python(), "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", str(ranks), str(SCRIPT), *args],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.torch
@pytest.mark.parametrize("ranks", [1, 2])
def test_the_script_on_cpu_prints_a_table_parse_all_reduce_reads(tmp_path: Path, ranks: int):
    out = torchrun(tmp_path, ranks, "--max-bytes", str(1 << 20))
    result = allreduce.parse_all_reduce(out.splitlines())
    assert [r.size_bytes for r in result.rows] == script.sizes(8, 1 << 20)
    assert len(result.ranks) == ranks and result.header.max_bytes == 1 << 20
    assert result.out_of_bounds == 0 and result.avg_busbw_gbs is not None
    assert all(r.out_of_place.errors == r.in_place.errors == "0" for r in result.rows)
    assert "gloo" in out
    if ranks == 1:  # one rank moves nothing over a bus
        assert result.peak_busbw_gbs == 0.0
    else:
        assert result.peak_busbw_gbs > 0.0
