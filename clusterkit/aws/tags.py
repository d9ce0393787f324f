"""Tag helpers in the shapes the AWS APIs want. The tag names live in plan.nodes."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from clusterkit.plan.nodes import CLUSTER_TAG


def to_list(tags: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"Key": k, "Value": v} for k, v in tags.items()]


def to_dict(tags: Iterable[Mapping[str, Any]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in tags or ()}


def cluster_filter(cluster: str) -> list[dict[str, Any]]:
    return [{"Name": f"tag:{CLUSTER_TAG}", "Values": [cluster]}]


def tag_specs(resource_types: Iterable[str], tags: Mapping[str, str]) -> list[dict[str, Any]]:
    """TagSpecifications for ``tags`` (none when there are none: EC2 refuses an empty one)."""
    return [{"ResourceType": r, "Tags": to_list(tags)} for r in resource_types] if tags else []
