"""Instance facts: GPUs (model, memory, architecture), vCPUs, memory, instance
store, network (EFA interfaces, network cards). PURE: reads only the JSON shipped
in ``catalog/data/``.

The data is rebuilt from AWS by ``scripts/refresh_catalog.py``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
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
class NetworkCard:
    index: int  # NetworkCardIndex
    gbps: float  # the card's baseline bandwidth
    max_interfaces: int  # network interfaces the card takes
    efa: bool  # takes an EFA (EFA with ENA) interface
    efa_only: bool  # takes an EFA-only interface


class InterfaceKind(str, Enum):
    """``InterfaceType`` of an EFA network interface in RunInstances/launch templates."""

    EFA = "efa"  # EFA with ENA: carries IP traffic too
    EFA_ONLY = "efa-only"  # the EFA device alone, no IP address


@dataclass(frozen=True)
class EfaInterface:
    card: int  # NetworkCardIndex
    device: int  # DeviceIndex
    kind: InterfaceKind


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
    efa_interfaces: int = 0  # EfaInfo.MaximumEfaInterfaces; 0 without EFA
    network_cards: tuple[NetworkCard, ...] = ()  # recorded for EFA or multi-card types

    @property
    def gpu_count(self) -> int:
        return self.gpu.count if self.gpu else 0

    @property
    def network_gbps(self) -> float | None:
        """The network's bandwidth in Gbit/s ("up to 25 Gbps": 25, the burst figure);
        None when the catalog gives no number ("Moderate")."""
        found = re.search(r"(\d+(?:\.\d+)?)\s*Gbps", self.network)
        return float(found.group(1)) if found else None

    @property
    def efa_gbps(self) -> float:
        """Gbit/s of the network cards that carry an EFA in ``efa_layout`` (0.0
        without EFA; the type's network figure where no card is recorded)."""
        cards = {c.index: c for c in self.network_cards}
        used = {i.card for i in efa_layout(self)}
        if used and not cards:
            return self.network_gbps or 0.0
        return float(sum(cards[i].gbps for i in used if i in cards))


def _card(entry: dict[str, Any]) -> NetworkCard:
    """One ``network_cards[]`` entry of ``instances.json`` -> a NetworkCard."""
    return NetworkCard(int(entry["index"]), float(entry.get("gbps", 0.0)),
                       int(entry.get("max_interfaces", 0)), bool(entry.get("efa", False)),
                       bool(entry.get("efa_only", False)))


def _from_entry(entry: dict[str, Any]) -> InstanceType:
    gpu = entry.get("gpu")
    efa = bool(entry.get("efa", False))
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
        efa=efa,
        arch=entry.get("arch", "x86_64"),
        efa_interfaces=int(entry.get("efa_interfaces", 1 if efa else 0)),
        network_cards=tuple(sorted((_card(c) for c in entry.get("network_cards", ())),
                                   key=lambda c: c.index)),
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


# Families for which AWS documents EFA-only interfaces on every card but the first.
# Amazon EC2 User Guide, "Maximize network bandwidth on Amazon EC2 instances with
# multiple network cards" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
# efa-acc-inst-types.html), section "EFA configuration for P5 and P5e instances",
# use case 1: "For the primary network interface (network card index 0, device
# index 0), use an EFA (EFA with ENA) network interface. For the remaining network
# interfaces (network card indexes 1-31, device index 1), use EFA-only network
# interfaces." The same page's basic configuration for the other multi-card types:
# "For each additional network interface, use the next unused network card index,
# device index 1, and either an EFA (EFA with ENA) or EFA-only network interface";
# there clusterkit keeps EFA (with ENA), as AWS's p4d.24xlarge launch examples do.
# (Later revisions of that page put an ENA-only primary at card 0 device 0, an
# EFA-only interface at card 0 device 1 and the others at device index 0.)
EFA_ONLY_FAMILIES = frozenset({"p5", "p5e"})


def _efa_cards(itype: InstanceType) -> list[NetworkCard]:
    """The cards that get an EFA: EFA-capable ones by index, at most ``efa_interfaces``
    (AWS allows one EFA per network card)."""
    if itype.efa_interfaces <= 0:
        return []
    cards = [c for c in itype.network_cards if c.efa] or [NetworkCard(0, 0.0, 1, True, False)]
    return cards[:itype.efa_interfaces]


def _efa_interface(itype: InstanceType, card: NetworkCard) -> EfaInterface:
    """The EFA interface ``card`` gets in ``efa_layout``."""
    if card.index == 0:  # the primary interface: IP traffic goes over it too
        return EfaInterface(0, 0, InterfaceKind.EFA)
    only = card.efa_only and itype.family in EFA_ONLY_FAMILIES
    return EfaInterface(card.index, 1, InterfaceKind.EFA_ONLY if only else InterfaceKind.EFA)


def efa_layout(itype: InstanceType) -> tuple[EfaInterface, ...]:
    """Every EFA interface a launch of ``itype`` should request, one per network card
    by card index: card 0's at device index 0 as ``efa`` (the primary interface), the
    others at device index 1, ``efa-only`` where AWS documents that layout
    (``EFA_ONLY_FAMILIES``), else ``efa``. Empty for a type without EFA."""
    return tuple(_efa_interface(itype, c) for c in _efa_cards(itype))


def _alternative_key(itype: InstanceType, other: InstanceType) -> tuple[Any, ...]:
    """Sort key: same GPU model first, then enough GPUs, then the cheapest-looking
    (fewest GPUs, least GPU memory, fewest vCPUs, least memory)."""
    same_model = bool(itype.gpu and other.gpu and other.gpu.model == itype.gpu.model)
    gpu_memory = other.gpu.memory_gib if other.gpu else 0.0
    return (not same_model, other.gpu_count < itype.gpu_count, other.gpu_count, gpu_memory,
            other.vcpus, other.memory_gib, other.name)


def _is_alternative(itype: InstanceType, other: InstanceType) -> bool:
    """Whether ``other`` has EFA and could stand in for ``itype`` at all."""
    return (other.name != itype.name and other.efa_interfaces > 0
            and other.arch == itype.arch and (other.gpu_count > 0) == (itype.gpu_count > 0))


def efa_alternatives(itype: InstanceType, limit: int = 5,
                     types: Iterable[InstanceType] | None = None) -> list[str]:
    """Names of EFA-capable types to suggest instead of ``itype`` (same architecture;
    with GPUs when ``itype`` has GPUs, without otherwise): the same GPU model first
    (more GPUs acceptable), then other GPUs; fewest GPUs, vCPUs and memory first.
    At most ``limit``; ``types`` defaults to the whole catalog."""
    pool = [t for t in (all_types() if types is None else types) if _is_alternative(itype, t)]
    return [t.name for t in sorted(pool, key=lambda t: _alternative_key(itype, t))][:limit]
