"""What differs between the spec and the cluster that runs, and whether `up` can apply it
in place. PURE.

`up` applies a changed ``nodes.count`` (launch the missing indexes in the cluster's AZ
and placement group, or remove the highest-numbered workers). A change of instance type,
market, region or image cannot be applied to running nodes: `up` refuses it and says to
`down` first. (The spec names no AZ: the AZ is the launch's choice, and added nodes
follow the running ones.)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum

from clusterkit.kinds import MarketPolicy
from clusterkit.plan.nodes import Node
from clusterkit.spec.model import Spec

# The markets a node may run in under each `nodes.market` policy.
POLICY_MARKETS = {policy.value: policy.markets for policy in MarketPolicy}


class Apply(Enum):
    """How `up` deals with one difference."""

    IN_PLACE = "applied in place"
    NEEDS_DOWN = "cannot be applied to running nodes"


@dataclass(frozen=True)
class Difference:
    key: str  # the spec key, e.g. "nodes.instance_types"
    running: str  # what runs
    wanted: str  # what the spec asks for
    apply: Apply

    def describe(self) -> str:
        return f"{self.key}: running {self.running}, spec says {self.wanted} ({self.apply.value})"


def _values(nodes: Sequence[Node], attr: str) -> list[str]:
    return sorted({str(getattr(n, attr)) for n in nodes if getattr(n, attr)})


def _image(node: Node) -> str:
    return node.image_id


def _market_drift(spec: Spec, live: Sequence[Node]) -> list[Difference]:
    """The workers' markets against ``nodes.market``; the master's against
    ``nodes.master.market`` when the spec sets it apart, else with the others."""
    master = spec.nodes.master.market
    others = [n for n in live if master is None or n.index != 0]
    out = []
    markets = _values(others, "market")
    allowed = POLICY_MARKETS.get(spec.nodes.market, (spec.nodes.market,))
    if any(m not in allowed for m in markets):
        out.append(Difference("nodes.market", ", ".join(markets), spec.nodes.market,
                              Apply.NEEDS_DOWN))
    running = _values([n for n in live if n.index == 0], "market")
    if master is not None and any(m != master for m in running):
        out.append(Difference("nodes.master.market", ", ".join(running), master,
                              Apply.NEEDS_DOWN))
    return out


def spec_drift(spec: Spec, nodes: Sequence[Node]) -> list[Difference]:
    """Every difference between ``spec`` and the cluster's live ``nodes`` (none for a
    cluster that does not exist yet). The image is compared only when the spec pins an
    AMI id; an AMI chosen by name stays the one the cluster was created with."""
    live = [n for n in nodes if n.live]
    if not live:
        return []
    out: list[Difference] = []
    types = _values(live, "instance_type")
    if any(t not in spec.nodes.instance_types for t in types):
        out.append(Difference("nodes.instance_types", ", ".join(types),
                              ", ".join(spec.nodes.instance_types), Apply.NEEDS_DOWN))
    out += _market_drift(spec, live)
    regions = _values(live, "region")
    wanted_regions = tuple(dict.fromkeys((spec.region, *spec.regions)))
    if any(r not in wanted_regions for r in regions):
        out.append(Difference("region", ", ".join(regions), ", ".join(wanted_regions),
                              Apply.NEEDS_DOWN))
    images = sorted({_image(n) for n in live if _image(n)})
    if spec.nodes.image.id and any(i != spec.nodes.image.id for i in images):
        out.append(Difference("nodes.image.id", ", ".join(images), spec.nodes.image.id,
                              Apply.NEEDS_DOWN))
    count = len({n.index for n in live if n.index is not None})
    if count != spec.nodes.count:
        out.append(Difference("nodes.count", str(count), str(spec.nodes.count),
                              Apply.IN_PLACE))
    return out


def refused(diffs: Sequence[Difference]) -> list[Difference]:
    """The differences `up` cannot apply in place."""
    return [d for d in diffs if d.apply is Apply.NEEDS_DOWN]
