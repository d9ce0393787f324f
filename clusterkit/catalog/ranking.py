"""Spot-offer ranking and the launch order `up` walks. PURE.

The rule (also in docs/howto/spot-search.md, "Spot search and the ranking rule"):

1. An offer is *eligible* when its zone is usable (a Local or Wavelength Zone only
   where the account opted in and the VPC has a subnet there: ``blocked`` is empty),
   it has a price, the price is within ``max_price``
   (USD per node-hour, both markets) or, with no ``max_price``, a spot price is
   not above the on-demand price (AWS's default spot maximum), and the type has
   GPUs when the other candidates do (a CPU-only offer never beats a GPU one).
2. Eligible offers sort by:
   a. demoted last: a known placement score below ``min_score`` (default 3 of 10)
      means AWS thinks a single-AZ gang of N is unlikely; unknown scores are neutral;
   b. GPU offers before CPU-only offers;
   c. cost per unit of compute: $/GPU-hour (CPU-only offers: $/vCPU-hour; $/node-hour
      where the vCPUs are unknown);
   d. higher placement score first (unknown counts as 5, the middle);
   e. position in the spec's ``instance_types`` (a tie-break: the list is the set of
      types that may be used, not an order of preference), then in ``regions``;
   f. zone name, then market.
3. Ineligible offers follow in the table, unranked, with the reason as a note.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusterkit.catalog.zones import ZoneType
from clusterkit.errors import AwsError, CapacityError, QuotaError
from clusterkit.kinds import Market, MarketPolicy

MARKET_POLICIES = tuple(p.value for p in MarketPolicy)
DEFAULT_MIN_SCORE = 3
NEUTRAL_SCORE = 5


@dataclass(frozen=True)
class Offer:
    instance_type: str
    region: str
    az: str | None  # zone name, e.g. "us-east-1a"
    az_id: str | None  # zone id, e.g. "use1-az1"
    market: Market
    price: float | None  # USD/h per node in this market
    on_demand_price: float | None
    gpus: int
    placement_score: int | None = None  # 1..10, None = unknown
    zone_type: ZoneType = ZoneType.AVAILABILITY_ZONE
    blocked: str = ""  # why the zone cannot be used (a Local Zone not opted in), "" = usable
    # a Capacity Block's end (epoch seconds): the nodes launched into it are tagged with it
    block_end: float | None = None
    vcpus: int = 0  # 0: unknown

    @property
    def per_gpu_hour(self) -> float | None:
        if self.price is None or self.gpus <= 0:
            return None
        return self.price / self.gpus

    @property
    def per_vcpu_hour(self) -> float | None:
        if self.price is None or self.vcpus <= 0:
            return None
        return self.price / self.vcpus

    @property
    def unit_cost(self) -> tuple[float | None, str]:
        """What it is ranked by: $/GPU-hour, else $/vCPU-hour, else $/node-hour, and
        the unit ("GPU", "vCPU", "node")."""
        if self.gpus > 0:
            return self.per_gpu_hour, "GPU"
        if self.vcpus > 0:
            return self.per_vcpu_hour, "vCPU"
        return self.price, "node"

    @property
    def discount(self) -> float | None:
        """Fraction saved against on-demand (0.89 = 89 % cheaper)."""
        if self.price is None or not self.on_demand_price:
            return None
        return 1.0 - self.price / self.on_demand_price


@dataclass(frozen=True)
class RankedOffer:
    rank: int | None  # 1-based among eligible offers; None = not eligible
    offer: Offer
    note: str = ""
    demoted: bool = False


def ineligible_reason(offer: Offer, *, max_price: float | None, want_gpus: bool) -> str:
    """Why ``offer`` cannot be used, or "" when it can."""
    if offer.blocked:
        return offer.blocked
    if offer.price is None:
        return f"no {offer.market} price"
    if want_gpus and offer.gpus <= 0:
        return "no GPU"
    if max_price is not None and offer.price > max_price:
        return f"over max price ${max_price:g}/h"
    if (max_price is None and offer.market == Market.SPOT and offer.on_demand_price is not None
            and offer.price > offer.on_demand_price):
        return "spot above on-demand"
    return ""


def _is_demoted(offer: Offer, min_score: int) -> bool:
    return offer.placement_score is not None and offer.placement_score < min_score


def _index(items: Sequence[str], value: str) -> int:
    return items.index(value) if value in items else len(items)


def _sort_key(offer: Offer, *, min_score: int, instance_types: Sequence[str],
              regions: Sequence[str]) -> tuple[Any, ...]:
    unit_cost = offer.unit_cost[0]
    score = NEUTRAL_SCORE if offer.placement_score is None else offer.placement_score
    return (_is_demoted(offer, min_score), offer.gpus <= 0, round(unit_cost or 0.0, 6), -score,
            _index(instance_types, offer.instance_type), _index(regions, offer.region),
            offer.region, offer.instance_type, offer.az or "", offer.market)


def rank_offers(offers: Sequence[Offer], *, max_price: float | None = None,
                min_score: int = DEFAULT_MIN_SCORE, instance_types: Sequence[str] = (),
                regions: Sequence[str] = ()) -> list[RankedOffer]:
    """Every offer in table order: eligible ones ranked 1.., then the rest with a note."""
    want_gpus = any(o.gpus > 0 for o in offers)
    key = lambda o: _sort_key(o, min_score=min_score,  # noqa: E731
                              instance_types=instance_types, regions=regions)
    good: list[Offer] = []
    bad: list[tuple[Offer, str]] = []
    for offer in offers:
        reason = ineligible_reason(offer, max_price=max_price, want_gpus=want_gpus)
        if reason:
            bad.append((offer, reason))
        else:
            good.append(offer)
    ranked = []
    for i, offer in enumerate(sorted(good, key=key), start=1):
        demoted = _is_demoted(offer, min_score)
        note = f"demoted: placement score {offer.placement_score} < {min_score}" \
            if demoted else ""
        ranked.append(RankedOffer(i, offer, note, demoted))
    ranked += [RankedOffer(None, o, why) for o, why in sorted(bad, key=lambda b: key(b[0]))]
    return ranked


def _grouped(offers: list[Offer]) -> list[Offer]:
    """Keep the best offer's region together, then its type: next AZ, next type, next
    region. ``offers`` is already in rank order; group order follows first appearance."""
    region_order: dict[str, int] = {}
    type_order: dict[tuple[str, str], int] = {}
    for offer in offers:
        region_order.setdefault(offer.region, len(region_order))
        type_order.setdefault((offer.region, offer.instance_type), len(type_order))
    return sorted(offers, key=lambda o: (region_order[o.region],
                                         type_order[(o.region, o.instance_type)]))


def launch_candidates(offers: Sequence[Offer], *, count: int, market_policy: str,
                      max_price: float | None, instance_types: Sequence[str],
                      regions: Sequence[str],
                      min_score: int = DEFAULT_MIN_SCORE) -> list[Offer]:
    """The ordered offers `up` tries for a single-AZ gang of ``count`` nodes.

    Spot offers (if the policy allows) grouped next AZ, next type, next region, the
    demoted ones after all others; then on-demand offers in the same grouping if the
    policy is "on-demand" or "spot-then-on-demand". Only ``instance_types`` and
    ``regions`` are used. ``count`` is what the placement scores were asked for."""
    if market_policy not in MARKET_POLICIES:
        raise ValueError(f"market policy {market_policy!r} not in {MARKET_POLICIES}")
    if count < 1:
        raise ValueError("count must be >= 1")
    allowed = [o for o in offers if o.instance_type in instance_types and o.region in regions
               and o.az is not None]
    ranked = [r for r in rank_offers(allowed, max_price=max_price, min_score=min_score,
                                     instance_types=instance_types, regions=regions)
              if r.rank is not None]
    out: list[Offer] = []
    for market in MarketPolicy(market_policy).markets:
        pool = [r for r in ranked if r.offer.market == market]
        out += _grouped([r.offer for r in pool if not r.demoted])
        out += _grouped([r.offer for r in pool if r.demoted])
    return out


def cheapest_excluded(offers: Sequence[Offer], *, market_policy: str,
                      max_price: float | None, instance_types: Sequence[str],
                      regions: Sequence[str]) -> str | None:
    """When ``launch_candidates`` left nothing: the cheapest offer of the spec's types,
    regions and markets that had a price, and why it was left out, in words; None when
    no offer had a price (there is nothing to name)."""
    markets = MarketPolicy(market_policy).markets
    priced = [o for o in offers if o.instance_type in instance_types and o.region in regions
              and o.az is not None and o.market in markets and o.price is not None]
    if not priced:
        return None
    cheapest = min(priced, key=lambda o: (o.price, describe_offer(o)))
    why = ineligible_reason(cheapest, max_price=max_price,
                            want_gpus=any(o.gpus > 0 for o in offers))
    return f"{describe_offer(cheapest)} at ${cheapest.price:.4f}/h ({why or 'demoted'})"


@dataclass(frozen=True)
class Attempt:
    offer: Offer
    ok: bool
    code: str | None = None  # AWS error code of a failed attempt
    reason: str = ""
    result: Any = field(default=None, compare=False)  # try_launch's return value, if ok


def describe_offer(offer: Offer) -> str:
    where = f"{offer.az} ({offer.az_id})" if offer.az_id else str(offer.az or offer.region)
    return f"{offer.instance_type} {offer.market} in {where}"


def walk_candidates(candidates: Sequence[Offer],
                    try_launch: Callable[[Offer], Any]) -> tuple[Offer, list[Attempt]]:
    """Call ``try_launch(offer)`` in order until one returns.

    CapacityError: the attempt is recorded and the next offer is tried. Any other
    AwsError (QuotaError, CredentialsError, ...) stops the walk at once and is raised.
    Returns (winning offer, attempts); the last attempt holds try_launch's result.
    Raises CapacityError listing every attempt when no offer worked."""
    attempts: list[Attempt] = []
    for offer in candidates:
        try:
            result = try_launch(offer)
        except CapacityError as exc:
            attempts.append(Attempt(offer, False, exc.code, exc.message))
            continue
        except QuotaError as exc:
            if not exc.hint:
                exc.hint = ("request a quota increase in the Service Quotas console, or ask "
                            "for fewer or smaller nodes")
            raise
        except AwsError:
            raise
        attempts.append(Attempt(offer, True, result=result))
        return offer, attempts
    raise _exhausted(attempts)


def _exhausted(attempts: list[Attempt]) -> CapacityError:
    if not attempts:
        return CapacityError("no launch candidates: no offer meets the spec",
                             "run `clusterkit spot SPEC` to see the offers; widen "
                             "nodes.instance_types or regions, or raise nodes.max_price")
    lines = [f"  {i}. {describe_offer(a.offer)}: {a.code or 'error'}: {a.reason}"
             for i, a in enumerate(attempts, start=1)]
    return CapacityError(f"every launch candidate failed ({len(attempts)} tried):\n"
                         + "\n".join(lines),
                         "try later, add instance types or regions, or allow on-demand "
                         "(nodes.market: spot-then-on-demand)",
                         code=attempts[-1].code)
