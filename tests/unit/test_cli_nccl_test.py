"""`clusterkit train SPEC --nccl-test`'s rendering: per size the bus bandwidth, the peak,
the nominal figure and the verdict (the real 2x p4d.24xlarge EFA capture, and a CPU
run's shape), --json, sizes as the option takes them, a failed test's exit."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from clusterkit.cli import train as cli_train
from clusterkit.cli.main import cli
from clusterkit.cluster.jobs import nccltest
from clusterkit.cluster.jobs.nccltest import NcclTest
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.node.jobstate import JobStateName
from clusterkit.training import allreduce

ROOT = Path(__file__).parents[2]
PERF_P4D = ROOT / "tests" / "data" / "node-captures" / \
    "all_reduce_perf.2x-p4d.24xlarge.efa.TRUNCATED.txt"
SPEC = str(ROOT / "examples" / "sandbox-cpu.yaml")


def p4d_test(state: JobStateName = JobStateName.SUCCEEDED) -> NcclTest:
    result = allreduce.parse_all_reduce(PERF_P4D.read_text().splitlines())
    return NcclTest(JobOutcome("c1", "j-20250101-120000-ab12", state, "exit 1"), result,
                    allreduce.bandwidth_verdict(result, 400.0), "p4d.24xlarge", 2, True, 400.0)


def test_the_p4d_capture_rendered():
    assert cli_train.nccl_test_lines(p4d_test()) == [
        "all-reduce test: 2 x p4d.24xlarge, float32 sum",  # rank lines cut from the capture
        "      size   bus bandwidth",
        "       8 B       0.00 GB/s",
        "     1 GiB      42.48 GB/s",
        "     2 GiB      43.36 GB/s",
        "     4 GiB      43.81 GB/s",
        "peak: 43.81 GB/s at 4 GiB",
        "nominal: 50.00 GB/s (400 Gbit/s, p4d.24xlarge EFA)",
        "verdict: peak bus bandwidth 43.81 GB/s = 88% of the type's nominal 50.0 GB/s "
        "(400 Gbit/s): looks like EFA on every interface"]


@pytest.mark.parametrize(("text", "size"), [
    ("4194304", 4194304), ("64K", 64 << 10), ("256M", 256 << 20), ("1G", 1 << 30),
    ("1GiB", 1 << 30), ("4mb", 4 << 20)])
def test_sizes_the_option_takes(text: str, size: int):
    assert cli_train._byte_size(None, None, text) == size  # type: ignore[arg-type]


@pytest.mark.parametrize("text", ["", "G", "1.5G", "-1", "1T", "one"])
def test_sizes_the_option_refuses(text: str):
    with pytest.raises(click.BadParameter):
        cli_train._byte_size(None, None, text)  # type: ignore[arg-type]


def test_the_command_prints_the_table_or_json(monkeypatch):
    seen = {}

    def do_nccl_test(spec_file, **kwargs):
        seen.update(kwargs, spec_file=spec_file)
        return p4d_test()

    monkeypatch.setattr(nccltest, "do_nccl_test", do_nccl_test)
    result = CliRunner().invoke(cli, ["train", SPEC, "--nccl-test", "--nccl-max-bytes",
                                      "1G", "--replace"])
    assert result.exit_code == 0, result.output
    assert (seen["spec_file"], seen["max_bytes"], seen["replace"]) == (SPEC, 1 << 30, True)
    assert "verdict: peak bus bandwidth 43.81 GB/s" in result.stdout
    as_json = CliRunner().invoke(cli, ["train", SPEC, "--nccl-test", "--json"])
    data = json.loads(as_json.stdout)
    assert (data["looks"], data["peak_busbw_gbs"], data["nominal_gbps"]) == ("efa", 43.81, 400.0)


def test_a_failed_test_exits_1_with_the_jobs_failure(monkeypatch):
    monkeypatch.setattr(nccltest, "do_nccl_test",
                        lambda *a, **k: p4d_test(JobStateName.FAILED))
    result = CliRunner().invoke(cli, ["train", SPEC, "--nccl-test"])
    assert result.exit_code == 1 and "job j-20250101-120000-ab12 failed" in result.stderr
