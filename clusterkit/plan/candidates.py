"""Where `up` may launch missing nodes, in the order it tries them: the observed offers
ranked by the spec, or (nodes already running) the running nodes' region, AZ and type.
PURE: the offer search is observed once (plan.world), ranked here."""

from __future__ import annotations

from collections.abc import Sequence

from clusterkit.catalog.prices import on_demand_price
from clusterkit.catalog.ranking import Offer, cheapest_excluded, launch_candidates
from clusterkit.errors import ClusterkitError
from clusterkit.kinds import Market
from clusterkit.plan.nodes import Node, node_order
from clusterkit.plan.reservation import reservation_offer
from clusterkit.plan.world import Observed
from clusterkit.spec.checks import MIXED_HINT, mixed_types
from clusterkit.spec.model import Spec


def offer_of(nodes: Sequence[Node]) -> Offer:
    """The offer new nodes of an existing cluster use: the master's type, AZ, market."""
    first = sorted((n for n in nodes if n.live), key=node_order)[0]
    od = on_demand_price(first.instance_type, first.region)
    price = first.price if first.price is not None else (
        od if first.market == Market.ON_DEMAND else None)
    return Offer(first.instance_type, first.region, first.az, None, first.market, price, od, 0,
                 block_end=first.block_end)


def ranked_or_refused(spec: Spec, offers: Sequence[Offer],
                      regions: Sequence[str]) -> list[Offer]:
    """``launch_candidates`` of ``offers``; when they leave none although some offer had
    a price, ClusterkitError (exit 1) naming the cheapest offer left out and why: `up`
    never falls back to an offer the spec excludes."""
    kept = launch_candidates(offers, count=spec.nodes.count, market_policy=spec.nodes.market,
                             max_price=spec.nodes.max_price,
                             instance_types=spec.nodes.instance_types, regions=regions)
    if kept:
        return kept
    cheapest = cheapest_excluded(offers, market_policy=spec.nodes.market,
                                 max_price=spec.nodes.max_price,
                                 instance_types=spec.nodes.instance_types, regions=regions)
    if cheapest is None:
        return []
    limit = spec.nodes.max_price
    what = (f"nodes.max_price ${limit:g}/h excludes every offer" if limit is not None
            else "every offer is excluded")
    raise ClusterkitError(f"nothing to launch: {what}; the cheapest left out is {cheapest}",
                          "raise nodes.max_price, or add instance types, regions or the "
                          "on-demand market (`clusterkit spot SPEC` lists every offer)")


def plan_candidates(spec: Spec, observed: Observed) -> tuple[Offer, ...]:
    """The offers a launch walks, first the plan's choice: a capacity reservation's own
    offer where the spec names one (its type and AZ). A running cluster grows where
    it runs (its region, AZ and type, spot then on-demand as a first launch would; its
    own offer when the search has none there); a new one takes the ranked offers of the
    qualifying regions, else the fallback offer."""
    if observed.reservation is not None:  # it decides the type and AZ: no offer search
        return (reservation_offer(observed.reservation),)
    live = [n for n in observed.nodes if n.live]
    regions = observed.regions or (observed.region,)
    if live:
        base = offer_of(live)
        ranked = ranked_or_refused(spec, observed.offers, regions) if observed.offers else []
        same = [o for o in ranked
                if (o.region, o.az, o.instance_type) == (base.region, base.az, base.instance_type)]
        return tuple(same or [base])
    ranked = ranked_or_refused(spec, observed.offers, regions)
    if ranked:
        return tuple(ranked)
    return (observed.fallback,) if observed.fallback else ()


def mixed_warnings(spec: Spec, offers: Sequence[Offer]) -> tuple[str, ...]:
    """validate's warning for an instance_types list of GPU types and types without
    (as the offer search counted their GPUs), said where `plan` and `up` show the launch."""
    gpus = {o.instance_type: o.gpus for o in offers}
    types = [t for t in spec.nodes.instance_types if t in gpus]
    message = mixed_types([t for t in types if gpus[t] > 0], [t for t in types if gpus[t] <= 0])
    return (f"nodes.instance_types: {message}; {MIXED_HINT}",) if message else ()
