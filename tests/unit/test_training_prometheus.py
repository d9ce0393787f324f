"""training/prometheus.py: a snapshot of samples in, metric families out, read back
through prometheus_client's own exposition and text parser; `--prometheus`'s
``[HOST:]PORT``. The GPU figures come from a real capture (a g5's `nvidia-smi`,
tests/data/node-captures) parsed by the sampler's own parser."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from clusterkit.node.sampler import parse_gpu_table, parse_meminfo
from clusterkit.node.samples import Sample
from clusterkit.training import diagnose
from clusterkit.training import prometheus as prom

CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"
MEMINFO = "MemTotal:       16000000 kB\nMemFree:  1000000 kB\nMemAvailable:    6000000 kB\n"
GPUS = parse_gpu_table((CAPTURES / "g5-4gpu-SIZE-UNSTATED.nvidia-smi.txt").read_text())


def sample(t: float, node: int, rate: float | None, gpus: list[dict] | None) -> dict:
    """One sampler record, through its wire type (what `top` keeps)."""
    return Sample(t, node, 2.0, job_cpu=1.5,
                  cpu={"user": 40.0, "system": 10.0, "idle": 45.0, "iowait": 5.0},
                  mem=parse_meminfo(MEMINFO), net={"rx_Bps": 1.25e8, "tx_Bps": 2.5e7},
                  disk={"device": "nvme1n1", "read_MBps": 80.0, "read_ms_per_op": 0.5},
                  samples_per_s=rate, progress_at=t,
                  gpus=None if gpus is None else tuple(gpus)).to_json()


def snapshot() -> prom.Snapshot:
    master = prom.NodeView(0, "master", "g5.12xlarge", 2.0, 1000.0, tuple(
        sample(1000.0 + 2 * i, 0, 100.0 + i, GPUS) for i in range(10)))
    worker = prom.NodeView(1, "worker-1", "g5.12xlarge", None, None,
                           (sample(1010.0, 1, 50.0, None),))
    gone = prom.NodeView(2, "worker-2", "g5.12xlarge", 2.0, 1000.0, (),
                         error="connection refused")
    findings = (diagnose.Finding(diagnose.Kind.DATA_STARVED, (0,), "e", "f",
                                 diagnose.Severity.CRITICAL),
                diagnose.Finding(diagnose.Kind.STRAGGLER, (1,), "e", "f",
                                 diagnose.Severity.WARNING))
    spend = {"cap": 5.0, "spent": 0.25, "rate": 4.0, "margin": 0.1, "checkpoint_at": 4.9,
             "decision": "under"}  # training.budget.Status.to_json
    return prom.Snapshot("c1", "20261128-1200-ab", (master, worker, gone), findings, spend)


def scrape(snap: prom.Snapshot | None) -> dict[str, dict[tuple, float]]:
    """name -> {labels (sorted items): value}, as Prometheus reads the exposition."""
    class Collector:
        def collect(self):
            return prom.families(snap)

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Collector())
    found: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        assert family.type == "gauge", family.name
        assert family.name in prom.METRICS
        for s in family.samples:
            found.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return found


def one(found: dict, name: str, **labels: str) -> float:
    return found[name][tuple(sorted({"cluster": "c1", **labels}.items()))]


def test_every_gpu_of_the_capture_is_a_series_in_base_units():
    found = scrape(snapshot())
    assert len(found["clusterkit_gpu_utilization_ratio"]) == 4
    assert one(found, "clusterkit_gpu_utilization_ratio", node="master", gpu="0") == 0.99
    assert one(found, "clusterkit_gpu_memory_used_bytes", node="master", gpu="0") == \
        3930 * 1024 * 1024
    assert one(found, "clusterkit_gpu_memory_total_bytes", node="master", gpu="3") == \
        23028 * 1024 * 1024
    assert one(found, "clusterkit_gpu_temperature_celsius", node="master", gpu="0") == 33
    assert one(found, "clusterkit_gpu_power_watts", node="master", gpu="0") == 222
    assert one(found, "clusterkit_gpu_info", node="master", gpu="1", model="NVIDIA A10G") == 1


def test_a_node_s_cpu_memory_network_disk_and_throughput():
    found = scrape(snapshot())
    window = snapshot().nodes[0].samples
    cpu, rate = diagnose.now(window)  # as `top`'s columns say them
    assert one(found, "clusterkit_job_cpu_cores", node="master") == cpu == 1.5
    assert one(found, "clusterkit_samples_per_second", node="master") == pytest.approx(rate)
    assert one(found, "clusterkit_samples_per_second", node="worker-1") == 50.0
    assert one(found, "clusterkit_node_cpu_ratio", node="master", mode="iowait") == 0.05
    assert one(found, "clusterkit_node_cpu_ratio", node="master", mode="user") == 0.4
    assert one(found, "clusterkit_node_memory_total_bytes", node="master") == \
        16000000 // 1024 * 1024 * 1024
    assert one(found, "clusterkit_node_memory_used_bytes", node="master") == \
        (16000000 - 6000000) // 1024 * 1024 * 1024
    assert one(found, "clusterkit_node_network_receive_bytes_per_second",
               node="master") == 1.25e8
    assert one(found, "clusterkit_node_disk_read_bytes_per_second", node="master",
               device="nvme1n1") == 80e6
    assert one(found, "clusterkit_node_disk_read_latency_seconds", node="master",
               device="nvme1n1") == 0.0005
    assert one(found, "clusterkit_node_sample_timestamp_seconds", node="master") == 1018.0


def test_price_and_the_job_s_cost_so_far():
    found = scrape(snapshot())
    assert one(found, "clusterkit_node_price_dollars_per_hour", node="master") == 2.0
    # launched at $2/h, the job started at 1000 and the newest sample is of 1018
    assert one(found, "clusterkit_job_cost_dollars", node="master") == \
        pytest.approx(2.0 * 18 / 3600)
    # no price known (no tag), no start read yet: no figure rather than a wrong one
    assert ("node", "worker-1") not in {k[1] for k in found["clusterkit_job_cost_dollars"]}
    assert len(found["clusterkit_node_price_dollars_per_hour"]) == 2


def test_spend_against_the_cap_only_with_a_cap():
    found = scrape(snapshot())
    assert found["clusterkit_job_spent_dollars"] == {(("cluster", "c1"),): 0.25}
    assert found["clusterkit_job_cap_dollars"] == {(("cluster", "c1"),): 5.0}
    uncapped = scrape(dataclasses.replace(snapshot(), budget=None))
    assert "clusterkit_job_spent_dollars" not in uncapped
    assert "clusterkit_job_cap_dollars" not in uncapped


def test_a_node_without_a_sample_is_down_and_has_no_figures():
    found = scrape(snapshot())
    assert one(found, "clusterkit_node_up", node="master") == 1
    assert one(found, "clusterkit_node_up", node="worker-2") == 0
    assert not [k for k in found["clusterkit_job_cpu_cores"] if ("node", "worker-2") in k]
    assert one(found, "clusterkit_node_info", node="worker-2",
               instance_type="g5.12xlarge") == 1
    # worker-1's sampler had no nvidia-smi: no GPU series for it
    assert not [k for k in found["clusterkit_gpu_utilization_ratio"]
                if ("node", "worker-1") in k]
    assert found["clusterkit_job_info"] == {
        (("cluster", "c1"), ("job_id", "20261128-1200-ab")): 1.0}


def test_every_finding_kind_is_a_series_on_every_node_valued_by_severity():
    found = scrape(snapshot())["clusterkit_finding"]
    assert len(found) == 3 * len(diagnose.Kind)
    by = {(dict(k)["node"], dict(k)["kind"]): v for k, v in found.items()}
    assert by[("master", "data_starved")] == 3 and by[("worker-1", "straggler")] == 2
    assert by[("master", "straggler")] == 0 and by[("worker-2", "healthy")] == 0
    assert sum(by.values()) == 5


def test_names_follow_prometheus_conventions():
    units = ("_ratio", "_bytes", "_seconds", "_celsius", "_watts", "_cores", "_dollars",
             "_per_second", "_per_hour", "_info", "_up", "_finding")
    for name, (doc, labels) in prom.METRICS.items():
        assert re.fullmatch(r"clusterkit_[a-z_]+", name) and name.endswith(units), name
        assert not name.endswith("_total"), f"{name}: a gauge has no _total"
        assert doc.endswith(".") and "job" not in labels  # Prometheus's own target label
    assert prom.metric_names() == tuple(prom.METRICS)


def test_nothing_before_the_first_refresh():
    assert prom.families(None) == [] and scrape(None) == {}


@pytest.mark.parametrize(("text", "expect"), [
    ("9101", ("127.0.0.1", 9101)), ("0.0.0.0:9101", ("0.0.0.0", 9101)),
    ("[::1]:9101", ("::1", 9101)), ("localhost:0", ("localhost", 0)),
    ("10.0.0.5:65535", ("10.0.0.5", 65535))])
def test_listen_addresses(text, expect):
    assert prom.parse_listen(text) == expect


@pytest.mark.parametrize(("text", "says"), [
    ("http", "no port"), ("::1:9101", "brackets"), ("[::1:9101", "brackets"),
    ("host:", "no port"), (":9101", "no host"), ("65536", "no port"), ("-1", "no port")])
def test_listen_addresses_refused(text, says):
    with pytest.raises(ValueError, match=says):
        prom.parse_listen(text)


def test_the_how_to_s_table_names_every_metric_with_its_labels():
    page = (Path(__file__).parents[2] / "docs" / "howto" / "prometheus.md").read_text()
    rows = re.findall(r"^\| `(clusterkit_[a-z_]+)` \| ([^|]+) \|", page, re.M)
    assert {name: tuple(re.findall(r"`(\w+)`", labels)) for name, labels in rows} == \
        {name: labels for name, (_doc, labels) in prom.METRICS.items()}


def test_the_how_to_names_every_finding_kind():
    page = (Path(__file__).parents[2] / "docs" / "howto" / "prometheus.md").read_text()
    said = page[page.index("The finding kinds are"):].split(".")[0].split(":")[1]  # the list
    assert set(re.findall(r"`(\w+)`", said)) == {k.value for k in diagnose.Kind}
