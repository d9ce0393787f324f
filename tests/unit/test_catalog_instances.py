"""Instance facts in clusterkit/catalog, cross-checked against the recorded AWS data."""

from __future__ import annotations

import ast
import csv
from pathlib import Path

import pytest

from clusterkit.catalog import build, instances

PRICE_CSV = Path(instances.__file__).parent / "data" / "aws-prices.csv"
REQUIRED = [
    "p3.2xlarge", "p3.8xlarge", "p3.16xlarge", "p3dn.24xlarge", "p4d.24xlarge",
    "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge", "c5.large", "c5.xlarge", "t3.micro",
    "t3.medium", "m5.large",
    *(f"g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                             "metal")),
    *(f"g5.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                           "24xlarge", "48xlarge")),
    *(f"g6.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
                           "24xlarge", "48xlarge")),
    *(f"i3.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")),
]


def _csv_types() -> dict[str, dict[str, str]]:
    with PRICE_CSV.open(newline="") as fh:
        return {row["InstanceType"]: row for row in csv.DictReader(fh)}


@pytest.mark.parametrize("name", REQUIRED)
def test_required_types_known(name: str) -> None:
    found = instances.lookup(name)
    assert found is not None and found.name == name
    assert found.family == name.split(".")[0]
    assert found.arch == "x86_64"


def test_every_recorded_type_agrees_with_the_price_data() -> None:
    rows = _csv_types()
    assert len(rows) >= 38
    for name, row in rows.items():
        facts = instances.lookup(name)
        assert facts is not None, name
        assert facts.vcpus == int(float(row["vCPUs"])), name
        assert facts.memory_gib == pytest.approx(float(row["MemoryGiB"])), name
        count = int(float(row["AcceleratorCount"] or 0))
        assert facts.gpu_count == count, name
        if count:
            gpu = ast.literal_eval(row["GpuInfo"])["Gpus"][0]
            assert facts.gpu.model == gpu["Name"], name
            assert facts.gpu.memory_gib == pytest.approx(gpu["MemoryInfo"]["SizeInMiB"] / 1024,
                                                         abs=0.05), name


def test_known_facts() -> None:
    p4d = instances.lookup("p4d.24xlarge")
    assert p4d.gpu == instances.Gpu(8, "A100", 40.0, "ampere", "8.0")
    assert p4d.instance_store == instances.Disks(8, 1000, True)
    assert p4d.network == "400 Gbps" and p4d.efa
    assert instances.lookup("p5.48xlarge").gpu.arch == "hopper"
    assert instances.lookup("p5e.48xlarge").gpu.model == "H200"
    assert instances.lookup("g6.xlarge").gpu.compute_capability == "8.9"
    assert instances.lookup("g4dn.xlarge").gpu.arch == "turing"
    assert instances.lookup("p3.2xlarge").gpu.arch == "volta"
    assert instances.lookup("p3.2xlarge").instance_store is None
    assert instances.lookup("i3.16xlarge").instance_store.total_gb == 8 * 1900
    assert instances.lookup("t3.micro").gpu is None
    assert instances.lookup("t3.micro").gpu_count == 0


def test_unknown_and_listing() -> None:
    assert instances.lookup("p9.huge") is None
    names = [t.name for t in instances.all_types()]
    assert names == sorted(names) and len(names) == len(set(names))
    assert "shipped" in instances.source() or "DescribeInstanceTypes" in instances.source()


def test_facts_are_immutable() -> None:
    with pytest.raises(AttributeError):
        instances.lookup("p4d.24xlarge").vcpus = 1  # type: ignore[misc]


def test_entry_from_describe_shape() -> None:
    item = {
        "InstanceType": "x1.big", "VCpuInfo": {"DefaultVCpus": 4},
        "MemoryInfo": {"SizeInMiB": 16384},
        "GpuInfo": {"Gpus": [{"Name": "L4", "Count": 2, "MemoryInfo": {"SizeInMiB": 22888}}]},
        "InstanceStorageInfo": {"Disks": [{"Count": 2, "SizeInGB": 940}],
                                "NvmeSupport": "required"},
        "NetworkInfo": {"NetworkPerformance": "4x 100 Gigabit", "EfaSupported": True},
        "ProcessorInfo": {"SupportedArchitectures": ["x86_64"]},
    }
    entry = build.entry_from_describe(item)
    assert entry["gpu"] == {"count": 2, "model": "L4", "memory_gib": 22.4, "arch": "ada",
                            "compute_capability": "8.9"}
    assert entry["instance_store"] == {"count": 2, "size_gb": 940, "nvme": True}
    assert entry["network"] == "400 Gbps" and entry["efa"]
    assert build.network_label("Up to 25 Gigabit") == "up to 25 Gbps"
    assert build.network_label("Low to Moderate") == "Low to Moderate"
    doc = build.build_catalog([item], source="t", extra=[{"name": "x1.big", "vcpus": 99}])
    assert doc["types"][0]["vcpus"] == 4  # AWS wins over the kept old entry
