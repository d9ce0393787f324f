"""On-demand prices from the AWS Pricing API and spot placement scores. Both are
optional lookups with a fallback (the shipped snapshot / "unknown"), so their
clients retry little: a missing Pricing endpoint must not stall `clusterkit spot`."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from clusterkit.aws.errors import aws_call
from clusterkit.aws.session import client
from clusterkit.catalog import prices as snapshot
from clusterkit.errors import AwsError

PRICING_REGION = "us-east-1"  # the Pricing API's main endpoint

if TYPE_CHECKING:
    from botocore.config import Config


@cache
def lookup_config() -> Config:
    """Few retries (botocore.config is imported when a lookup is made: see aws.session)."""
    from botocore.config import Config

    return Config(retries={"mode": "standard", "max_attempts": 2}, connect_timeout=5,
                  read_timeout=20)


def pages(call: Callable[..., dict[str, Any]], key: str, **params: Any) -> Iterator[Any]:
    """Items under ``key`` of every page of a NextToken-paginated call."""
    token = None
    while True:
        page = call(**params, **({"NextToken": token} if token else {}))
        yield from page.get(key, [])
        token = page.get("NextToken")
        if not token:
            return


def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """GetProducts filters for shared-tenancy Linux on-demand of one type in one region."""
    fields = {"instanceType": instance_type, "regionCode": region, "operatingSystem": "Linux",
              "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
              "licenseModel": "No License required"}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def parse_price_list(price_list: Iterable[str | dict[str, Any]]) -> float | None:
    """The lowest hourly USD on-demand price in a GetProducts ``PriceList``."""
    found: list[float] = []
    for item in price_list:
        product = json.loads(item) if isinstance(item, str) else item
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = dim.get("pricePerUnit", {}).get("USD")
                if usd is not None and dim.get("unit", "Hrs") in ("Hrs", "Hours") \
                        and float(usd) > 0:
                    found.append(float(usd))
    return min(found) if found else None


class OnDemandPrices:
    """On-demand $/h from the Pricing API, falling back to the shipped snapshot.

    After the first failure the API is not asked again (it is account-wide: if it is
    unreachable or forbidden once, it is for every region). Thread-safe."""

    def __init__(self, session: Any, *, use_api: bool = True) -> None:
        self._lock = threading.Lock()
        # made here, in the caller's thread: boto3 sessions are not thread-safe
        self._client: Any = client(session, "pricing", PRICING_REGION,
                                   config=lookup_config()) if use_api else None
        self.api_error: str | None = None if use_api else "Pricing API not asked"
        self.used_snapshot = False
        self.count_call: Callable[[str], None] = lambda _op: None

    def price(self, instance_type: str, region: str) -> float | None:
        if self.api_error is None:
            try:
                self.count_call("GetProducts")
                with aws_call("GetProducts"):
                    found = parse_price_list(pages(
                        self._client.get_products, "PriceList", ServiceCode="AmazonEC2",
                        Filters=product_filters(instance_type, region)))
                if found is not None:
                    return found
            except AwsError as err:
                with self._lock:
                    self.api_error = self.api_error or err.message
        with self._lock:
            self.used_snapshot = True
        return snapshot.on_demand_price(instance_type, region)

    @property
    def source(self) -> str:
        return "snapshot" if self.used_snapshot else "pricing-api"


def placement_scores(ec2: Any, instance_type: str, regions: Sequence[str],
                     count: int) -> dict[tuple[str, str], int]:
    """(region, zone id) -> score 1..10 for a single-AZ gang of ``count`` nodes.

    Raises AwsError (translated) when the account or endpoint does not allow it."""
    with aws_call("GetSpotPlacementScores", instance_type):
        items = list(pages(ec2.get_spot_placement_scores, "SpotPlacementScores",
                           InstanceTypes=[instance_type], TargetCapacity=count,
                           TargetCapacityUnitType="units", SingleAvailabilityZone=True,
                           RegionNames=list(regions)))
    return {(s["Region"], s["AvailabilityZoneId"]): int(s["Score"]) for s in items
            if s.get("AvailabilityZoneId") and s.get("Score") is not None}


def lookup_client(session: Any, region: str) -> Any:
    """An EC2 client for optional lookups (few retries)."""
    return client(session, "ec2", region, config=lookup_config())


def describe_instance_types(session: Any, region: str, names: Sequence[str]) -> list[dict]:
    """DescribeInstanceTypes items for ``names`` (100 per call, as AWS allows). Types the
    region does not know (InvalidInstanceType) are left out instead of failing all."""
    ec2 = client(session, "ec2", region)
    items: list[dict] = []
    wanted = list(names)
    for i in range(0, len(wanted), 100):
        batch = wanted[i:i + 100]
        for _ in range(2):
            try:
                with aws_call("DescribeInstanceTypes", region):
                    items += list(pages(ec2.describe_instance_types, "InstanceTypes",
                                        InstanceTypes=batch))
                break
            except AwsError as err:
                unknown = _unknown_types(err) if err.code == "InvalidInstanceType" else set()
                if not unknown:
                    raise
                batch = [t for t in batch if t not in unknown]
                if not batch:  # asking for no types would list every type
                    break
    return items


def _unknown_types(err: AwsError) -> set[str]:
    listed = re.search(r"\[([^\]]*)\]", err.message)
    return {t.strip() for t in listed.group(1).split(",")} if listed else set()
