"""Instance facts: GPUs (model, memory, architecture), vCPUs, memory, instance
store, network. PURE: reads only the JSON shipped in ``catalog/data/``.

The data is rebuilt from AWS by ``scripts/refresh_catalog.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any


@dataclass(frozen=True)
class Gpu:
    count: int
    model: str  # e.g. "A100"
    memory_gib: float  # per GPU
    arch: str  # "volta" | "turing" | "ampere" | "ada" | "hopper" | ...
    compute_capability: str  # e.g. "8.0"


@dataclass(frozen=True)
class Disks:
    count: int
    size_gb: int  # per disk
    nvme: bool

    @property
    def total_gb(self) -> int:
        return self.count * self.size_gb


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    vcpus: int
    memory_gib: float
    gpu: Gpu | None
    instance_store: Disks | None
    network: str  # e.g. "400 Gbps", "up to 25 Gbps"
    efa: bool
    arch: str  # "x86_64" | "arm64"

    @property
    def gpu_count(self) -> int:
        return self.gpu.count if self.gpu else 0

    @property
    def network_gbps(self) -> float | None:
        """The network's bandwidth in Gbit/s ("up to 25 Gbps": 25, the burst figure);
        None when the catalog gives no number ("Moderate")."""
        found = re.search(r"(\d+(?:\.\d+)?)\s*Gbps", self.network)
        return float(found.group(1)) if found else None


def _from_entry(entry: dict[str, Any]) -> InstanceType:
    gpu = entry.get("gpu")
    disks = entry.get("instance_store")
    return InstanceType(
        name=entry["name"],
        family=entry["family"],
        vcpus=int(entry["vcpus"]),
        memory_gib=float(entry["memory_gib"]),
        gpu=Gpu(int(gpu["count"]), gpu["model"], float(gpu["memory_gib"]), gpu["arch"],
                str(gpu["compute_capability"])) if gpu else None,
        instance_store=Disks(int(disks["count"]), int(disks["size_gb"]), bool(disks["nvme"]))
        if disks else None,
        network=entry["network"],
        efa=bool(entry.get("efa", False)),
        arch=entry.get("arch", "x86_64"),
    )


def read_data_text(filename: str) -> str:
    """Text of a file shipped in ``clusterkit/catalog/data/``."""
    return resources.files("clusterkit.catalog").joinpath("data", filename).read_text("utf-8")


@lru_cache(maxsize=1)
def _catalog() -> dict[str, InstanceType]:
    doc = json.loads(read_data_text("instances.json"))
    return {e["name"]: _from_entry(e) for e in doc["types"]}


def lookup(name: str) -> InstanceType | None:
    """Facts for one instance type, or None if the catalog does not know it."""
    return _catalog().get(name.strip())


def all_types() -> list[InstanceType]:
    """Every known instance type, sorted by name."""
    return sorted(_catalog().values(), key=lambda t: t.name)


def source() -> str:
    """Where the shipped instance data came from."""
    return str(json.loads(read_data_text("instances.json")).get("source", "unknown"))
