"""node/gpuwatch.py: a node's GPU health read and judged while its job runs. The
health texts are the real captures in tests/data/node-captures (no GPU here); the
command runner runs real (tiny) programs."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from clusterkit.node import gpuwatch
from clusterkit.node.gpuwatch import HealthWatch, Reader, unfit_reason

CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"
SMI_Q = (CAPTURES / "a100-80gb.nvidia-smi-q.ecc-remapped-rows.TRUNCATED.txt").read_text()


def _log(name: str) -> str:
    return (CAPTURES / name).read_text(errors="replace")


class Reads:
    """A reader of fixed health texts, counting its calls."""

    def __init__(self, kernel_log: str = "", smi_q: str | None = None):
        self.health, self.calls = {"kernel_log": kernel_log, "smi_q": smi_q}, 0

    def __call__(self) -> dict:
        self.calls += 1
        return self.health


def test_a_gpu_fallen_off_the_bus_makes_the_node_unfit_once() -> None:
    reads = Reads(_log("gpu-fallen-off-bus.dmesg.driver-570.txt"))
    watch = HealthWatch(8, every=60, reader=reads)
    fatal = watch.check(1000.0, 8)
    assert fatal == [("Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS on 0000:b3:00.0",
                      "Xid 79 = GPU has fallen off the bus")]
    assert unfit_reason(fatal) == ("Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS on "
                                   "0000:b3:00.0 (Xid 79 = GPU has fallen off the bus)")
    assert watch.check(2000.0, 8) == [] and reads.calls == 1  # said once, then never read


@pytest.mark.parametrize("log, lines, smi_q, count", [
    ("xid-13-109.dmesg-T.TRUNCATED.txt", None, None, 8),  # application errors
    ("xid-63-64.sagemaker-a100-80gb.txt", 1, None, None),  # its Xid 63 line alone
    (None, None, SMI_Q, 8),  # remapped rows pending: a reset applies them
])
def test_what_a_reset_clears_or_the_application_caused_leaves_the_node_fit(
        log: str | None, lines: int | None, smi_q: str | None, count: int | None) -> None:
    text = "\n".join(_log(log).splitlines()[:lines]) if log else ""
    watch = HealthWatch(8, every=60, reader=Reads(text, smi_q))
    assert watch.check(1000.0, count) == [], text


def test_a_double_bit_ecc_error_and_a_failed_remap_are_fatal_and_both_named() -> None:
    watch = HealthWatch(8, every=60, reader=Reads(_log("xid-48-64.onprem-UNSTATED.syslog.txt")))
    fatal = watch.check(1000.0, 8)
    assert [meaning for _e, meaning in fatal] == ["Xid 48 = Double Bit ECC Error",
                                                  "Xid 64 = GPU memory remapping failure"]
    assert unfit_reason(fatal).count("Xid 64 = GPU memory remapping failure") == 1


def test_a_gpu_missing_from_nvidia_smi_is_fatal() -> None:
    watch = HealthWatch(8, every=60, reader=Reads())
    assert watch.check(1000.0, 7) == [("7 of 8 GPUs reported by nvidia-smi",
                                       "a GPU is missing")]


def test_it_reads_only_on_gpu_nodes_and_only_every_interval() -> None:
    reads = Reads()
    cpu_node = HealthWatch(0, every=60, reader=reads)
    assert cpu_node.check(1000.0, None) == [] and reads.calls == 0
    assert cpu_node.due(1000.0, saw_gpus=True)  # a type the catalog does not know
    off = HealthWatch(8, every=0, reader=reads)
    assert off.check(1000.0, 8) == [] and reads.calls == 0
    watch = HealthWatch(8, every=60, reader=reads)
    for now in (1000.0, 1030.0, 1059.9, 1060.0, 1100.0):
        watch.check(now, 8)
    assert reads.calls == 2  # at 1000 and 1060
    started = HealthWatch(8, every=60, reader=reads, started=1000.0)  # the daemon's
    for now in (1000.0, 1059.9, 1060.0):
        started.check(now, 8)
    assert reads.calls == 3  # its first read one interval after the job's start


def test_the_reader_gives_output_only_of_a_command_that_exits_0(tmp_path: Path) -> None:
    reader = Reader(timeout=5)
    assert reader.output(["sh", "-c", "echo hi"]) == "hi\n"
    assert reader.output(["sh", "-c", "echo no; exit 3"]) is None
    assert reader.output([str(tmp_path / "no-such-program")]) is None


def test_a_hung_command_is_not_waited_on_nor_started_again_while_it_hangs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "hang"
    script.write_text("#!/bin/sh\nexec sleep 30\n")
    script.chmod(0o755)
    started: list[str] = []  # every program the reader starts, in order
    popen = subprocess.Popen

    def counting_popen(argv, *args, **kwargs):
        started.append(argv[0])
        return popen(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", counting_popen)
    reader = Reader(timeout=0.5)
    assert reader.output([str(script)]) is None
    # killed, but suppose it still hangs (D state): simulate by a process that lives
    hung = reader.stuck[str(script)]
    hung.wait(5)
    assert hung.poll() is not None  # SIGKILL took this one; a D-state one would live on
    reader.stuck[str(script)] = alive = _Alive()
    assert reader.output([str(script)]) is None
    assert started == [str(script)]  # not started again: nothing waited on
    assert reader.stuck[str(script)] is alive


class _Alive:
    def poll(self) -> None:
        return None


def test_read_health_reads_nvidia_smi_q_and_the_kernel_logs_gpu_lines(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake `nvidia-smi` and `dmesg` on PATH print the real captures."""
    kernel = CAPTURES / "xid-43-31-94.dmesg-T.driver-535.TRUNCATED.txt"
    smi = CAPTURES / "a100-80gb.nvidia-smi-q.ecc-remapped-rows.TRUNCATED.txt"
    for name, capture in (("nvidia-smi", smi), ("dmesg", kernel)):
        (tmp_path / name).write_text(f"#!/bin/sh\ncat {capture}\n")
        (tmp_path / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    found = gpuwatch.read_health()
    assert found["smi_q"] == smi.read_text()
    lines = found["kernel_log"].splitlines()
    assert lines and all("NVRM" in x or "Xid" in x for x in lines)
    assert len(lines) == sum(1 for x in kernel.read_text().splitlines()
                             if any(w in x for w in gpuwatch.GPU_LINE))
