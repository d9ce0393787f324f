"""The per-node metrics sampler: its parsers against real captures
(../shared/data/node-captures/) and real-format /proc texts, LogTail, and Sampler end to
end against a fake /proc in tmp_path."""

from __future__ import annotations

import ast
import json
import os
import re
import stat
from pathlib import Path

import pytest

from clusterkit.node import sampler, samples

CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"  # copies of ../shared/data
TABLES = {
    "p3.16xlarge.nvidia-smi.txt": (8, "Tesla V100-SXM2..."),
    "g5-4gpu-SIZE-UNSTATED.nvidia-smi.txt": (4, "NVIDIA A10G"),
    "unattributed/p4d.24xlarge-INFERRED.nvidia-smi.txt": (8, "NVIDIA A100-SXM4-40GB"),
}
SPEEDOMETER = {
    "mxnet-speedometer.dist_sync-2-workers.spaces.txt": [26.81, 26.60, 28.01],
    "mxnet-speedometer.dist_sync-3-nodes.tabs.old-iter.txt": [113.19, 111.20],
}

PROC_STAT = """\
cpu  10132153 290696 3084719 46828483 16683 0 25195 0 175628 0
cpu0 1393280 32966 572056 13343292 6130 0 17875 0 23933 0
intr 199292 33 9 0 0 0 0 0 0 1 0 0 0 0 0 0 0
ctxt 1990473
btime 1062191376
processes 2915
procs_running 1
procs_blocked 0
"""
NET_DEV = """\
Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: 9000000   10000    0    0    0     0          0         0  9000000   10000    0    0    0     0       0          0
  ens5: 5000000    4000    0    0    0     0          0         0  2000000    3000    0    0    0     0       0          0
  ens6:1000         10    0    0    0     0          0         0      500      5    0    0    0     0       0          0
"""
DISKSTATS = """\
 259       0 nvme0n1 145810 30 12043762 31866 1373543 1121 56014906 1312512 0 1090284 1344378 0 0 0 0
 259       1 nvme0n1p1 145740 30 12040106 31850 1373543 1121 56014906 1312512 0 1090268 1344362 0 0 0 0
 259       2 nvme1n1 1000 0 80000 2000 0 0 0 0 0 1500 2000 0 0 0 0
   9       0 md0 2000 0 160000 0 0 0 0 0 0 0 0 0 0 0 0
"""
MEMINFO = """\
MemTotal:       16108732 kB
MemFree:          611676 kB
MemAvailable:   12015836 kB
Buffers:          523468 kB
Cached:         10598924 kB
HugePages_Total:       0
"""
CPU_STAT = """\
usage_usec 7250000
user_usec 5000000
system_usec 2250000
nr_periods 0
nr_throttled 0
throttled_usec 0
"""


def pid_stat(pid: int, utime: int, stime: int) -> str:
    return (f"{pid} (python3 (x)) S 1 {pid} {pid} 0 -1 4194560 20000 0 0 0 {utime} {stime} "
            "0 0 20 0 8 0 123456 3000000000 50000 18446744073709551615 1 1 0 0 0 0 0 "
            "16781312 17634 0 0 0 17 3 0 0 0 0 0\n")


# ----- parsers ------------------------------------------------------------------------

def test_the_sampler_parses_under_python_3_8() -> None:
    ast.parse(Path(sampler.__file__).read_text(), feature_version=(3, 8))


@pytest.mark.parametrize("name", sorted(TABLES))
def test_gpu_table_reads_every_gpu_of_the_real_captures(name: str) -> None:
    count, gpu_name = TABLES[name]
    gpus = sampler.parse_gpu_table((CAPTURES / name).read_text())
    assert [g["index"] for g in gpus] == list(range(count))
    assert {g["name"] for g in gpus} == {gpu_name}
    assert all(set(g) == set(sampler.GPU_KEYS) for g in gpus)


def test_gpu_table_values_are_the_captures_numbers() -> None:
    def read(name: str) -> list[dict]:
        return sampler.parse_gpu_table((CAPTURES / name).read_text())
    p3, g5, p4d = (read(n) for n in TABLES)
    assert p3[0] == {"index": 0, "name": "Tesla V100-SXM2...", "util": 0, "mem_used": 0,
                     "mem_total": 16160, "power": 39, "temp": 41}
    assert (p3[7]["util"], p3[7]["power"], p3[2]["temp"]) == (3, 40, 38)
    assert g5[0] == {"index": 0, "name": "NVIDIA A10G", "util": 99, "mem_used": 3930,
                     "mem_total": 23028, "power": 222, "temp": 33}
    assert [g["power"] for g in g5] == [222, 18, 15, 9]
    assert [g["mem_used"] for g in p4d] == [36327, 2875, 427, 427, 36327, 1, 37883, 37881]
    assert (p4d[5]["temp"], p4d[5]["power"], p4d[5]["mem_total"]) == (40, 56, 40960)


@pytest.mark.parametrize("name", sorted(TABLES))
def test_gpu_csv_gives_what_the_table_gives(name: str) -> None:
    table = sampler.parse_gpu_table((CAPTURES / name).read_text())
    csv = "".join(", ".join(str(g[k]) for k in sampler.GPU_KEYS) + "\n" for g in table)
    assert sampler.parse_gpu_csv(csv) == table


def test_gpu_csv_reads_floats_and_not_available_fields() -> None:
    text = ("0, NVIDIA A10G, 99, 3930, 23028, 222.34, 33\n"
            "1, NVIDIA A10G, [N/A], 7, 23028, [Not Supported], 16\n")
    assert sampler.parse_gpu_csv(text) == [
        {"index": 0, "name": "NVIDIA A10G", "util": 99, "mem_used": 3930,
         "mem_total": 23028, "power": 222.34, "temp": 33},
        {"index": 1, "name": "NVIDIA A10G", "util": None, "mem_used": 7,
         "mem_total": 23028, "power": None, "temp": 16}]
    assert sampler.GPU_QUERY == [
        "nvidia-smi", "--query-gpu=index,name,utilization.gpu,memory.used,memory.total,"
        "power.draw,temperature.gpu", "--format=csv,noheader,nounits"]


def test_proc_stat_and_cpu_percentages() -> None:
    before = sampler.parse_proc_stat(PROC_STAT)
    assert before == {"user": 10132153 + 290696, "system": 3084719 + 25195,
                      "idle": 46828483, "iowait": 16683, "steal": 0,
                      "total": 10132153 + 290696 + 3084719 + 46828483 + 16683 + 25195}
    after = dict(before, user=before["user"] + 300, system=before["system"] + 100,
                 idle=before["idle"] + 550, iowait=before["iowait"] + 50,
                 total=before["total"] + 1000)
    assert sampler.cpu_percentages(before, after) == \
        {"user": 30.0, "system": 10.0, "idle": 55.0, "iowait": 5.0}
    assert sampler.cpu_percentages(before, before) is None


def test_cgroup_and_pid_cpu() -> None:
    assert sampler.parse_cgroup_cpu(CPU_STAT) == 7250000
    assert sampler.parse_cgroup_cpu("nr_periods 0\n") is None
    assert sampler.parse_pid_stat(pid_stat(4242, 1500, 250)) == 1750
    assert sampler.parse_pid_stat("4242 (x) Z") is None


def test_net_dev_sums_everything_but_loopback() -> None:
    assert sampler.parse_net_dev(NET_DEV) == {"rx": 5001000, "tx": 2000500}


def test_diskstats_and_disk_rates() -> None:
    before = sampler.parse_diskstats(DISKSTATS, "/dev/nvme0n1")
    assert before == {"reads": 145810, "sectors_read": 12043762, "ms_reading": 31866}
    assert sampler.parse_diskstats(DISKSTATS, "md0") == \
        {"reads": 2000, "sectors_read": 160000, "ms_reading": 0}
    assert sampler.parse_diskstats(DISKSTATS, "nvme9n1") is None
    after = {"reads": 145810 + 100, "sectors_read": 12043762 + 40000,
             "ms_reading": 31866 + 250}
    assert sampler.disk_rates(before, after, 2.0) == \
        {"read_MBps": 10.24, "read_ms_per_op": 2.5}
    assert sampler.disk_rates(before, before, 2.0) == \
        {"read_MBps": 0.0, "read_ms_per_op": None}


def test_meminfo_used_is_total_less_available() -> None:
    assert sampler.parse_meminfo(MEMINFO) == \
        {"used_mb": (16108732 - 12015836) // 1024, "total_mb": 16108732 // 1024}
    old_kernel = "\n".join(x for x in MEMINFO.splitlines() if "Available" not in x)
    assert sampler.parse_meminfo(old_kernel)["used_mb"] == \
        (16108732 - 611676 - 523468 - 10598924) // 1024


@pytest.mark.parametrize("name", sorted(SPEEDOMETER))
def test_throughput_of_the_real_speedometer_lines(name: str) -> None:
    lines = (CAPTURES / name).read_text().splitlines()
    assert [sampler.throughput(x) for x in lines] == SPEEDOMETER[name]
    assert all(sampler.is_progress(x) for x in lines)


def test_throughput_forms_and_a_user_pattern() -> None:
    assert sampler.throughput(
        "INFO:root:Epoch[3] Batch [0-20]\tSpeed: 1234.56 samples/sec\taccuracy=0.5") == 1234.56
    assert sampler.throughput("step 120 | loss 2.31 | 850.2 samples/s | lr 0.1") == 850.2
    assert sampler.throughput("eval: 10 samples/step") is None
    assert sampler.throughput("loss 2.3") is None
    pattern = r"tput=([0-9.]+)"
    assert sampler.throughput("it 5 tput=77.5 img/s", pattern) == 77.5
    assert sampler.throughput("900 samples/s", pattern) is None
    assert sampler.throughput("tput=abc", r"tput=(\w+)") is None
    assert sampler.is_progress("Step 100: loss=0.3")
    assert sampler.is_progress("INFO global_step=4200 loss=0.3")
    assert not sampler.is_progress("timestep 5 of the simulation")
    assert sampler.is_progress("INFO:root:Epoch[2] Train-accuracy=0.9")
    assert not sampler.is_progress("NCCL INFO Channel 00 : 0[0] -> 1[1]")


# ----- LogTail --------------------------------------------------------------------------

def test_logtail_partial_lines_new_files_and_truncation(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    tail = sampler.LogTail([str(a), str(b)])
    assert tail.read() == {}
    a.write_text("one\ntw")
    assert tail.read() == {str(a): ["one"]}
    with a.open("a") as f:
        f.write("o\r\nthree\n")
    b.write_text("b1\n")
    assert tail.read() == {str(a): ["two", "three"], str(b): ["b1"]}
    assert tail.read() == {}
    a.write_text("new\n")  # truncated: shorter than the offset
    assert tail.read() == {str(a): ["new"]}
    b.rename(tmp_path / "b.log.1")
    b.write_text("rotated, longer than before\n")
    assert tail.read() == {str(b): ["rotated, longer than before"]}


def test_logtail_skips_ahead_past_a_burst(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sampler, "LOG_READ_MAX", 64)
    log = tmp_path / "w.log"
    log.write_text("".join(f"line {i:04d} padding\n" for i in range(100)))
    lines = sampler.LogTail([str(log)]).read()[str(log)]
    assert lines[-1] == "line 0099 padding" and len(lines) < 5
    assert all(re.fullmatch(r"line \d{4} padding", x) for x in lines)


# ----- Sampler end to end ---------------------------------------------------------------

class FakeNode:
    def __init__(self, root: Path):
        self.proc, self.cg = root / "proc", root / "cg"
        (self.proc / "net").mkdir(parents=True)
        self.cg.mkdir()
        self.write(PROC_STAT, NET_DEV, DISKSTATS, 7250000)
        (self.proc / "meminfo").write_text(MEMINFO)

    def write(self, stat_text: str, net: str, disks: str, usec: int) -> None:
        (self.proc / "stat").write_text(stat_text)
        (self.proc / "net" / "dev").write_text(net)
        (self.proc / "diskstats").write_text(disks)
        (self.cg / "cpu.stat").write_text(CPU_STAT.replace("7250000", str(usec)))

    def advance(self) -> None:
        """2 s later: 1000 jiffies (300 user, 100 system, 550 idle, 50 iowait), 3 s of
        job CPU, 1 MB in, 0.5 MB out, 100 reads of 40000 sectors in 250 ms on nvme1n1."""
        f = PROC_STAT.splitlines()[0].split()
        f[1], f[3] = str(int(f[1]) + 300), str(int(f[3]) + 100)
        f[4], f[5] = str(int(f[4]) + 550), str(int(f[5]) + 50)
        stat_text = PROC_STAT.replace(PROC_STAT.splitlines()[0], " ".join(f))
        net = NET_DEV.replace("5000000    4000", "6000000    4000") \
                     .replace("2000000    3000", "2500000    3000")
        disks = DISKSTATS.replace("nvme1n1 1000 0 80000 2000", "nvme1n1 1100 0 120000 2250")
        self.write(stat_text, net, disks, 7250000 + 3000000)


def smi_script(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-smi"
    path.write_text(f"#!/bin/sh\necho run >> {tmp_path / 'smi-runs'}\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_sampler_steps_rates_and_logs(tmp_path: Path) -> None:
    node, job = FakeNode(tmp_path), tmp_path / "job"
    job.mkdir()
    logs = [str(job / "w0.log"), str(job / "w1.log")]
    s = sampler.Sampler(str(job), cgroup_path=str(node.cg), logs=logs, node=3,
                        dataset_device="/dev/nvme1n1", proc_root=str(node.proc),
                        nvidia_smi=str(tmp_path / "no-such-smi"))
    first = s.step(1000.0)
    assert first == {"v": 1, "t": 1000.0, "node": 3, "dt": None, "job_cpu": None, "cpu": None,
                     "mem": {"used_mb": 3996, "total_mb": 15731}, "net": None,
                     "disk": None, "samples_per_s": None, "progress_at": None}
    node.advance()
    Path(logs[0]).write_text("Epoch[0] Batch [20]\tSpeed: 100.0 samples/sec\n"
                             "Epoch[0] Batch [40]\tSpeed: 120.0 samples/sec\n"
                             "Epoch[0] Batch [60]\tSpeed: 999")
    Path(logs[1]).write_text("step 7 | 50.5 samples/s\n")
    assert s.step(1001.0) is None  # the interval has not passed
    second = s.step(1002.0)
    assert second["dt"] == 2.0 and second["job_cpu"] == 1.5
    assert second["cpu"] == {"user": 30.0, "system": 10.0, "idle": 55.0, "iowait": 5.0}
    assert second["net"] == {"rx_Bps": 500000.0, "tx_Bps": 250000.0}
    assert second["disk"] == {"device": "/dev/nvme1n1", "read_MBps": 10.24,
                              "read_ms_per_op": 2.5}
    assert second["samples_per_s"] == 110.0 + 50.5
    assert second["progress_at"] == 1002.0
    assert "gpus" not in second
    third = s.step(1004.0)
    assert third["samples_per_s"] is None and third["progress_at"] == 1002.0
    assert third["net"] == {"rx_Bps": 0.0, "tx_Bps": 0.0}
    assert third["disk"]["read_ms_per_op"] is None
    assert [x.to_json() for x in samples.read_samples(str(job))] == [first, second, third]
    assert [x.to_json() for x in samples.read_samples(str(job), after=1001.0)] == \
        [second, third]


def test_job_cpu_from_the_pids_without_a_cgroup(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    for pid in (100, 200):
        (node.proc / str(pid)).mkdir()
        (node.proc / str(pid) / "stat").write_text(pid_stat(pid, 1000, 100))
    pids = [100, 200]
    s = sampler.Sampler(str(tmp_path), cgroup_path=str(tmp_path / "gone"),
                        pids_fn=lambda: pids, proc_root=str(node.proc),
                        nvidia_smi=str(tmp_path / "no-such-smi"))
    s.sample(10.0)
    tck = os.sysconf("SC_CLK_TCK")
    (node.proc / "100" / "stat").write_text(pid_stat(100, 1000 + tck, 100 + tck))
    (node.proc / "300").mkdir()  # started in the interval: all its time counts
    (node.proc / "300" / "stat").write_text(pid_stat(300, tck, 0))
    pids[:] = [100, 200, 300, 400]  # 400 has no /proc entry (it already ended)
    assert s.sample(12.0)["job_cpu"] == 1.5


def test_metrics_rotate_past_max_bytes(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    s = sampler.Sampler(str(tmp_path), proc_root=str(node.proc), max_bytes=1000,
                        nvidia_smi=str(tmp_path / "no-such-smi"))
    for i in range(40):
        s.step(100.0 + 2 * i)
    current, old = tmp_path / samples.SAMPLES, tmp_path / samples.SAMPLES_OLD
    assert old.exists() and 1000 < old.stat().st_size < 1400
    assert current.stat().st_size <= 1000
    ts = [x.t for x in samples.read_samples(str(tmp_path))]
    assert ts == sorted(ts) and ts[-1] == 178.0 and len(ts) < 40
    with current.open("a") as f:
        f.write("not json\n[1]\n")
    assert [x.t for x in samples.read_samples(str(tmp_path))] == ts


def test_gpus_from_a_smi_that_answers(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    smi = smi_script(tmp_path, "printf '0, NVIDIA A10G, 99, 3930, 23028, 222.34, 33\\n'")
    s = sampler.Sampler(str(tmp_path), proc_root=str(node.proc), nvidia_smi=smi)
    assert s.sample(1.0)["gpus"] == [{"index": 0, "name": "NVIDIA A10G", "util": 99,
                                      "mem_used": 3930, "mem_total": 23028,
                                      "power": 222.34, "temp": 33}]


def test_a_failing_smi_is_retried_at_most_once_a_minute(tmp_path: Path) -> None:
    node = FakeNode(tmp_path)
    smi = smi_script(tmp_path, "echo 'NVIDIA-SMI has failed' >&2; exit 9")
    s = sampler.Sampler(str(tmp_path), proc_root=str(node.proc), nvidia_smi=smi)
    for t in range(0, 130, 2):
        assert "gpus" not in s.sample(float(t))
    assert (tmp_path / "smi-runs").read_text().count("run") == 3  # at 0, 60, 120


def test_a_hung_smi_is_killed_and_not_waited_for(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(sampler, "SMI_TIMEOUT", 0.2)
    node = FakeNode(tmp_path)
    s = sampler.Sampler(str(tmp_path), proc_root=str(node.proc),
                        nvidia_smi=smi_script(tmp_path, "exec sleep 30"))
    assert "gpus" not in s.sample(1.0)
    assert s.smi_stuck is not None
    s.smi_stuck.wait(5)
    assert "gpus" not in s.sample(70.0)


def test_sampler_on_this_machines_proc(tmp_path: Path) -> None:
    s = sampler.Sampler(str(tmp_path), pids_fn=lambda: [os.getpid()],
                        nvidia_smi=str(tmp_path / "no-such-smi"))
    s.step(1.0)
    sum(i * i for i in range(200000))
    line = s.step(3.0)
    assert line["job_cpu"] >= 0 and line["mem"]["total_mb"] > 0
    assert set(line["cpu"]) == {"user", "system", "idle", "iowait"}
    assert line["net"]["rx_Bps"] >= 0
    assert json.loads((tmp_path / samples.SAMPLES).read_text().splitlines()[-1]) == line
