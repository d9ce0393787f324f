"""The network between a cluster's nodes, as a launch asks for it and the plan says it:
every EFA interface of an EFA-capable type (``network.efa``). PURE: the catalog's
network facts (DescribeInstanceTypes' NetworkInfo, cached) and the spec."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.catalog.instances import EfaInterface, InterfaceKind, efa_layout, lookup
from clusterkit.spec.model import Spec

MASTER = 0


def efa_interfaces(spec: Spec, instance_type: str) -> tuple[EfaInterface, ...]:
    """The EFA interfaces a node of ``instance_type`` launches with: all the type has
    (the catalog's layout: card and device index, efa or efa-only) unless
    ``network.efa`` is false; none for a type without EFA (or one the catalog lacks)."""
    itype = lookup(instance_type)
    if itype is None or not spec.network.efa_wanted:
        return ()
    return efa_layout(itype)


def efa_lines(spec: Spec, instance_type: str, slots: Sequence[int]) -> list[str]:
    """What the plan says of a launch's interconnect: each node's EFA interfaces and
    their bandwidth, the Elastic IP a master with several of them gets; a type with EFA
    that ``network.efa: false`` turns off. Nothing for a type without EFA."""
    itype = lookup(instance_type)
    if itype is None or not itype.efa_interfaces:
        return []
    if not spec.network.efa_wanted:
        return [f"  network: no EFA (network.efa: false; {instance_type} has "
                f"{itype.efa_interfaces})"]
    layout = efa_layout(itype)
    only = sum(1 for i in layout if i.kind is InterfaceKind.EFA_ONLY)
    kinds = f", {only} of them efa-only" if only else ""
    lines = [f"  network: {len(layout)} EFA interface(s) per node on {len(layout)} network "
             f"card(s){kinds}, {itype.efa_gbps:g} Gbps per node"
             + (", in the cluster placement group" if spec.nodes.placement_group else "")]
    if len(layout) > 1 and MASTER in slots:
        lines.append("  the master gets an Elastic IP (EC2 gives no public IP to an "
                     "instance with several network interfaces; released by down)")
    return lines
