"""training/allreduce.py against the real all_reduce_perf captures (tests/data/node-
captures: verbatim copies of ../shared/data/node-captures/): the table's rows, its average,
and whether the peak bus bandwidth looks like EFA or TCP sockets. Lines written inline
are edge cases (empty, garbage, the header forms the captures cut) and say so."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterkit.training import allreduce
from clusterkit.training.allreduce import Looks

CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"

PERF_P4D = "all_reduce_perf.2x-p4d.24xlarge.efa.TRUNCATED.txt"
PERF_SOCKET = "all_reduce_perf.eks-karpenter-UNSTATED.socket.TRUNCATED.txt"


def lines(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()


def test_all_reduce_on_two_p4d_over_efa():
    result = allreduce.parse_all_reduce(lines(PERF_P4D))
    assert [r.size_bytes for r in result.rows] == [8, 1073741824, 2147483648, 4294967296]
    assert result.peak_busbw_gbs == 43.81
    assert result.avg_busbw_gbs == 11.2432
    assert result.out_of_bounds == 0
    biggest = result.rows[-1]
    assert (biggest.count, biggest.dtype, biggest.redop, biggest.root) == \
        (1073741824, "float", "sum", None)
    assert biggest.out_of_place == allreduce.Timing(183834.0, 23.36, 43.81, "5e-07")
    assert biggest.in_place == allreduce.Timing(184216.0, 23.31, 43.72, "5e-07")
    assert result.peak_row is biggest
    assert result.header is None and result.ranks == ()  # cut from the capture


def test_all_reduce_over_sockets_with_the_newer_columns():
    result = allreduce.parse_all_reduce(lines(PERF_SOCKET))
    (row,) = result.rows
    assert (row.size_bytes, row.count, row.root) == (1073741824, 268435456, -1)
    assert row.out_of_place == allreduce.Timing(536774.0, 2.00, 2.00, "0")
    assert row.in_place == allreduce.Timing(541545.0, 1.98, 1.98, "0")
    assert result.peak_busbw_gbs == 2.00
    assert result.avg_busbw_gbs == 0.733914


def test_bandwidth_verdict_two_p4d_is_efa():
    verdict = allreduce.bandwidth_verdict(allreduce.parse_all_reduce(lines(PERF_P4D)), 400.0)
    assert verdict.looks == Looks.EFA
    assert verdict.nominal_gbs == 50.0
    assert verdict.ratio == pytest.approx(43.81 / 50.0)
    assert verdict.summary == ("peak bus bandwidth 43.81 GB/s = 88% of the type's nominal "
                               "50.0 GB/s (400 Gbit/s): looks like EFA on every interface")


def test_bandwidth_verdict_socket_run_on_a_p4d_figure_is_tcp():
    # the socket capture's type is not stated; weighed against p4d.24xlarge's 400 Gbit/s
    verdict = allreduce.bandwidth_verdict(allreduce.parse_all_reduce(lines(PERF_SOCKET)), 400.0)
    assert verdict.looks == Looks.SOCKETS
    assert verdict.ratio == pytest.approx(0.04)
    assert "looks like TCP sockets" in verdict.summary


def test_bandwidth_verdict_degraded_between_the_thresholds():
    # 43.81 GB/s against p5.48xlarge's 3200 Gbit/s (400 GB/s) is 11%: not sockets, not full
    verdict = allreduce.bandwidth_verdict(allreduce.parse_all_reduce(lines(PERF_P4D)), 3200.0)
    assert verdict.looks == Looks.DEGRADED
    assert "fewer interfaces" in verdict.summary


def test_bandwidth_verdict_needs_large_messages():
    small = [line for line in lines(PERF_P4D) if "1073741824" not in line
             and "2147483648" not in line and "4294967296" not in line]
    verdict = allreduce.bandwidth_verdict(allreduce.parse_all_reduce(small), 400.0)
    assert verdict.looks == Looks.UNKNOWN and "-e 1G" in verdict.summary
    assert "--nccl-max-bytes 1G" in verdict.summary
    assert allreduce.bandwidth_verdict(allreduce.parse_all_reduce([]), 400.0).looks == Looks.UNKNOWN
    assert allreduce.bandwidth_verdict(allreduce.parse_all_reduce(lines(PERF_P4D)), 0).looks == \
        Looks.UNKNOWN


def test_all_reduce_header_and_rank_lines():
    # nccl-tests' header and rank line forms (inline: the captures cut them)
    text = ["[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 4294967296 step: 2(factor) "
            "warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
            "[1,0]<stdout>:#  Rank  0 Group  0 Pid     25 on nccl-tests-efa-16-worker-0 "
            "device  0 [0x10] NVIDIA A100-SXM4-40GB", *lines(PERF_P4D)]
    result = allreduce.parse_all_reduce(text)
    assert result.header == allreduce.PerfHeader(1, 1, 8, 4294967296)
    assert result.ranks == (allreduce.Rank(0, 0, 25, "nccl-tests-efa-16-worker-0", 0, "0x10",
                                      "NVIDIA A100-SXM4-40GB"),)
    assert result.peak_busbw_gbs == 43.81


@pytest.mark.parametrize("text", [
    [], ["garbage"], ["1 2 3 4 5 6 7 8 9 10 11 12"],
    ["8 2 float sum a b c d e f g h"],  # the right shape, no numbers
    ["# Avg bus bandwidth    : "],
])
def test_all_reduce_without_a_table(text: list[str]):
    result = allreduce.parse_all_reduce(text)
    assert result.rows == () and result.peak_busbw_gbs is None and result.avg_busbw_gbs is None


def test_all_reduce_skips_nccl_lines_between_rows():
    text = lines(PERF_P4D)
    text.insert(4, "[1,0]<stdout>:ip-1:1:1 [0] NCCL INFO Launch mode Parallel")
    assert len(allreduce.parse_all_reduce(text).rows) == 4


def test_bandwidth_verdict_without_efa_says_only_the_ratio():
    # the EFA capture's table weighed as if the nodes had no EFA (400 Gbit/s of ENA)
    verdict = allreduce.bandwidth_verdict(allreduce.parse_all_reduce(lines(PERF_P4D)), 400.0,
                                          efa=False)
    assert verdict.looks == Looks.NO_EFA
    assert verdict.summary.endswith("= 88% of the type's nominal 50.0 GB/s (400 Gbit/s): no "
                                    "EFA on these nodes: NCCL runs over TCP sockets")
