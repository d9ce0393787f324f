"""Turn DescribeInstanceTypes items into catalog entries. PURE.

Used by ``scripts/refresh_catalog.py`` to rebuild ``data/instances.json``. AWS
does not report GPU architecture or compute capability, so those come from
``GPU_MODELS`` below (NVIDIA's published compute capabilities). The EFA facts
(``efa_interfaces``, ``network_cards``) come from ``NetworkInfo``: the launch asks
for one EFA interface per network card, so it needs each card's index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# model -> (architecture, compute capability)
GPU_MODELS: Mapping[str, tuple[str, str]] = {
    "K80": ("kepler", "3.7"),
    "M60": ("maxwell", "5.2"),
    "V100": ("volta", "7.0"),
    "T4": ("turing", "7.5"),
    "T4g": ("turing", "7.5"),
    "A10G": ("ampere", "8.6"),
    "A100": ("ampere", "8.0"),
    "L4": ("ada", "8.9"),
    "L40S": ("ada", "8.9"),
    "H100": ("hopper", "9.0"),
    "H200": ("hopper", "9.0"),
}


def network_label(performance: str, cards: Iterable[Mapping[str, Any]] = ()) -> str:
    """'4x 100 Gigabit' -> '400 Gbps', 'Up to 25 Gigabit' -> 'up to 25 Gbps'."""
    text = performance.strip()
    multi = re.fullmatch(r"(\d+)x (\d+(?:\.\d+)?) Gigabit", text)
    if multi:
        total = int(multi.group(1)) * float(multi.group(2))
        return f"{total:g} Gbps"
    upto = re.fullmatch(r"Up to (\d+(?:\.\d+)?) Gigabit", text, re.IGNORECASE)
    if upto:
        return f"up to {upto.group(1)} Gbps"
    plain = re.fullmatch(r"(\d+(?:\.\d+)?) Gigabit", text)
    if plain:
        return f"{plain.group(1)} Gbps"
    return text


def _gpu_entry(info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not info or not info.get("Gpus"):
        return None
    gpu = info["Gpus"][0]
    model = str(gpu["Name"])
    arch, cc = GPU_MODELS.get(model, ("unknown", "unknown"))
    return {
        "count": int(sum(int(g.get("Count", 0)) for g in info["Gpus"])),
        "model": model,
        "memory_gib": round(int(gpu["MemoryInfo"]["SizeInMiB"]) / 1024, 1),
        "arch": arch,
        "compute_capability": cc,
    }


def _disks_entry(info: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not info or not info.get("Disks"):
        return None
    disk = info["Disks"][0]
    return {
        "count": int(sum(int(d.get("Count", 0)) for d in info["Disks"])),
        "size_gb": int(disk["SizeInGB"]),
        "nvme": info.get("NvmeSupport", "unsupported") in ("required", "supported"),
    }


def _card_entry(card: Mapping[str, Any], efa_supported: bool) -> dict[str, Any]:
    """One ``NetworkCards[]`` item -> {index, gbps, max_interfaces, efa, efa_only};
    ``gbps`` is the baseline bandwidth (the peak where AWS gives no baseline)."""
    kinds = card.get("InterfaceTypes")
    gbps = card.get("BaselineBandwidthInGbps", card.get("PeakBandwidthInGbps", 0.0))
    return {
        "index": int(card["NetworkCardIndex"]),
        "gbps": float(gbps or 0.0),
        "max_interfaces": int(card.get("MaximumNetworkInterfaces", 0)),
        "efa": "efa" in kinds if kinds is not None else efa_supported,
        "efa_only": "efa-only" in kinds if kinds is not None else False,
    }


def _network_entry(net: Mapping[str, Any]) -> dict[str, Any]:
    """``NetworkInfo`` -> {"efa_interfaces": N} plus ``network_cards`` (sorted by
    index) only for types with EFA or with more than one network card."""
    efa = bool(net.get("EfaSupported", False))
    count = int(net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 1 if efa else 0))
    entry: dict[str, Any] = {"efa_interfaces": count if efa else 0}
    cards = net.get("NetworkCards", [])
    if efa or len(cards) > 1:
        entry["network_cards"] = sorted((_card_entry(c, efa) for c in cards),
                                        key=lambda c: c["index"])
    return entry


def entry_from_describe(item: Mapping[str, Any]) -> dict[str, Any]:
    """One DescribeInstanceTypes ``InstanceTypes[]`` item -> one catalog entry."""
    name = str(item["InstanceType"])
    net = item.get("NetworkInfo", {})
    archs = item.get("ProcessorInfo", {}).get("SupportedArchitectures", ["x86_64"])
    return {
        "name": name,
        "family": name.split(".")[0],
        "vcpus": int(item["VCpuInfo"]["DefaultVCpus"]),
        "memory_gib": round(int(item["MemoryInfo"]["SizeInMiB"]) / 1024, 2),
        "gpu": _gpu_entry(item.get("GpuInfo")),
        "instance_store": _disks_entry(item.get("InstanceStorageInfo")),
        "network": network_label(str(net.get("NetworkPerformance", "unknown"))),
        "efa": bool(net.get("EfaSupported", False)),
        **_network_entry(net),
        "arch": "x86_64" if "x86_64" in archs else str(archs[0]),
    }


def build_catalog(items: Iterable[Mapping[str, Any]], *, source: str,
                  extra: Iterable[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The whole ``instances.json`` document, types sorted by name."""
    entries = {e["name"]: e for e in map(entry_from_describe, items)}
    for entry in extra:
        entries.setdefault(entry["name"], dict(entry))
    return {"source": source, "types": [entries[k] for k in sorted(entries)]}
