"""bench/bench_gpu.sh, the GPU checks kept as a script: shellcheck-clean, a usage line
(exit 2 on a bad option), and on a machine without an NVIDIA driver (this one) it stops
at the first part with a message and exit 1, running nothing else. The NCCL and
mxnet-cu112 parts need a GPU machine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests import support

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "bench_gpu.sh"


def _run(*args: str, path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=path or os.environ["PATH"])
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_shellcheck_clean():
    support.shellcheck_clean(SCRIPT)


def test_usage_and_bad_options():
    assert _run("--help").stdout.startswith("usage: bench/bench_gpu.sh")
    for bad in (["--frobnicate"], ["--mb", "lots"]):
        result = _run(*bad)
        assert result.returncode == 2 and "usage:" in result.stderr


def test_without_a_gpu_driver_it_stops_at_once(tmp_path: Path):
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    result = _run(path=f"{tmp_path}:/usr/bin:/bin")
    assert result.returncode == 1
    assert "no NVIDIA GPU or driver here" in result.stderr
    assert "== 2." not in result.stdout  # torchrun never started
