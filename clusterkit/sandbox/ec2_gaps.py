"""Fill gaps in the emulator's EC2 API that clusterkit's real-AWS code paths touch.

moto implements no placement-group API, and its CloudFormation skips
AWS::EC2::PlacementGroup, so the emulator never holds a placement group. Here
DescribePlacementGroups answers truthfully (an empty list, in AWS's response shape)
instead of moto's "not yet implemented" page, so product code needs no sandbox branch.
"""

from __future__ import annotations

from typing import Any


def _describe_placement_groups(self: Any) -> Any:
    from moto.core.responses import ActionResult

    return ActionResult({"PlacementGroups": []})


def install() -> None:
    """Idempotent: patch moto's EC2 responses in this process."""
    from moto.ec2.responses import EC2Response

    if not hasattr(EC2Response, "describe_placement_groups"):
        EC2Response.describe_placement_groups = _describe_placement_groups
