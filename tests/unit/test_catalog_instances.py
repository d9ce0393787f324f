"""Instance facts in clusterkit/catalog, cross-checked against the recorded AWS data."""

from __future__ import annotations

import ast
import csv
import gzip
import json
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


# --- EFA facts (issue 28): interface counts, card layout, bandwidth, alternatives ---

EFA_COUNTS = {
    "p4d.24xlarge": 4, "p4de.24xlarge": 4, "p5.48xlarge": 32, "p5e.48xlarge": 32,
    "p5en.48xlarge": 16, "g5.48xlarge": 1, "p3dn.24xlarge": 1, "c5.large": 0,
    "p3.2xlarge": 0, "p3.8xlarge": 0, "p3.16xlarge": 0,
}
EFA_GBPS = {"p4d.24xlarge": 400.0, "p5.48xlarge": 3200.0, "p5e.48xlarge": 3200.0,
            "p5en.48xlarge": 3200.0, "g5.48xlarge": 100.0, "c5.large": 0.0}


@pytest.mark.parametrize("name,count", sorted(EFA_COUNTS.items()))
def test_efa_interface_counts(name: str, count: int) -> None:
    itype = instances.lookup(name)
    layout = instances.efa_layout(itype)
    assert itype.efa_interfaces == count == len(layout)
    assert itype.efa == (count > 0)


@pytest.mark.parametrize("name,gbps", sorted(EFA_GBPS.items()))
def test_efa_bandwidth(name: str, gbps: float) -> None:
    assert instances.lookup(name).efa_gbps == gbps


def test_p5en_is_eight_h200() -> None:
    p5en = instances.lookup("p5en.48xlarge")
    assert p5en.gpu == instances.Gpu(8, "H200", 141.0, "hopper", "9.0")
    assert p5en.network == "3200 Gbps" and len(p5en.network_cards) == 16


@pytest.mark.parametrize("name", ["p5.48xlarge", "p5e.48xlarge"])
def test_p5_layout_one_efa_per_card_efa_only_after_the_primary(name: str) -> None:
    layout = instances.efa_layout(instances.lookup(name))
    assert [i.card for i in layout] == list(range(32))
    assert layout[0] == instances.EfaInterface(0, 0, instances.InterfaceKind.EFA)
    assert {(i.device, i.kind) for i in layout[1:]} == {(1, instances.InterfaceKind.EFA_ONLY)}


@pytest.mark.parametrize("name,cards", [("p4d.24xlarge", 4), ("p4de.24xlarge", 4),
                                        ("p5en.48xlarge", 16)])
def test_undocumented_multi_card_layout_keeps_efa_with_ena(name: str, cards: int) -> None:
    layout = instances.efa_layout(instances.lookup(name))
    assert [(i.card, i.device) for i in layout] == [(0, 0)] + [(c, 1) for c in range(1, cards)]
    assert {i.kind for i in layout} == {instances.InterfaceKind.EFA}


@pytest.mark.parametrize("name", ["g5.48xlarge", "p3dn.24xlarge", "g4dn.8xlarge",
                                  "p5.4xlarge"])
def test_single_card_layout_is_the_primary_interface(name: str) -> None:
    assert instances.efa_layout(instances.lookup(name)) == (
        instances.EfaInterface(0, 0, instances.InterfaceKind.EFA),)


def test_no_efa_no_layout() -> None:
    c5 = instances.lookup("c5.large")
    assert instances.efa_layout(c5) == () and c5.network_cards == ()
    assert instances.InterfaceKind.EFA_ONLY.value == "efa-only"


def test_network_cards_are_read_from_the_catalog() -> None:
    cards = instances.lookup("p4d.24xlarge").network_cards
    assert cards[1] == instances.NetworkCard(1, 100.0, 15, True, True)
    assert [c.index for c in cards] == [0, 1, 2, 3]


def test_entry_without_network_facts_gets_defaults() -> None:
    entry = {"name": "x1.big", "family": "x1", "vcpus": 4, "memory_gib": 16,
             "network": "100 Gbps", "efa": True}
    itype = instances._from_entry(entry)
    assert itype.efa_interfaces == 1 and itype.network_cards == ()
    assert instances.efa_layout(itype) == (
        instances.EfaInterface(0, 0, instances.InterfaceKind.EFA),)
    assert itype.efa_gbps == 100.0
    plain = instances._from_entry({**entry, "efa": False})
    assert plain.efa_interfaces == 0 and instances.efa_layout(plain) == ()


def test_efa_alternatives_same_gpu_model_first() -> None:
    found = instances.efa_alternatives(instances.lookup("g4dn.xlarge"))
    assert found[:4] == ["g4dn.8xlarge", "g4dn.16xlarge", "g4dn.12xlarge", "g4dn.metal"]
    assert len(found) == 5 and instances.lookup(found[4]).gpu_count == 1
    assert all(instances.lookup(n).efa_interfaces > 0 for n in found)


def test_efa_alternatives_for_v100_and_limits() -> None:
    p3 = instances.lookup("p3.16xlarge")
    found = instances.efa_alternatives(p3, limit=3)
    assert found[0] == "p3dn.24xlarge" and len(found) == 3
    assert all(instances.lookup(n).gpu_count >= 8 for n in found)
    assert "p3.16xlarge" not in instances.efa_alternatives(p3, limit=50)


def test_efa_alternatives_without_gpus_or_candidates() -> None:
    assert instances.efa_alternatives(instances.lookup("c5.large")) == []
    g5 = instances.lookup("g5.xlarge")
    assert instances.efa_alternatives(g5, types=[g5, instances.lookup("c5.large")]) == []


def _moto_item(name: str) -> dict:
    """A real DescribeInstanceTypes item: the copy shipped in moto's EC2 resources."""
    moto = pytest.importorskip("moto")
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path, "rt") as fh:
        return json.load(fh)[name]


def _shipped_entry(name: str) -> dict:
    """The entry ``instances.json`` holds for ``name``."""
    doc = json.loads(instances.read_data_text("instances.json"))
    return next(e for e in doc["types"] if e["name"] == name)


def test_entry_from_describe_network_cards_from_real_item() -> None:
    entry = build.entry_from_describe(_moto_item("p4d.24xlarge"))
    assert entry["efa"] and entry["efa_interfaces"] == 4
    assert [c["index"] for c in entry["network_cards"]] == [0, 1, 2, 3]
    assert entry["network_cards"][0] == {"index": 0, "gbps": 100.0, "max_interfaces": 15,
                                         "efa": True, "efa_only": True}
    assert entry == _shipped_entry("p4d.24xlarge")


def test_entry_from_describe_without_efa_keeps_the_json_small() -> None:
    entry = build.entry_from_describe(_moto_item("c5.large"))
    assert entry["efa_interfaces"] == 0 and "network_cards" not in entry
    multi = {"NetworkPerformance": "25 Gigabit", "EfaSupported": False,
             "NetworkCards": [{"NetworkCardIndex": i, "BaselineBandwidthInGbps": 12.5,
                               "MaximumNetworkInterfaces": 4,
                               "InterfaceTypes": ["interface"]} for i in (1, 0)]}
    cards = build._network_entry(multi)["network_cards"]
    assert [c["index"] for c in cards] == [0, 1] and not cards[0]["efa"]
