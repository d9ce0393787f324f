"""The small on-demand c5.large cluster the sandbox benches bring up (one copy for all)."""

from __future__ import annotations

import uuid

SPEC = """\
name: {name}
region: us-east-1
nodes:
  count: {count}
  instance_types: [c5.large]
  market: on-demand
  image: {{id: ami-1e749f67}}
  placement_group: {placement_group}
  root_volume: {{size_gb: 8, type: gp3}}
ssh: {{user: ubuntu}}
"""


def spec_text(prefix: str, count: int, *, placement_group: bool) -> str:
    """A uniquely named spec of ``count`` nodes (name: ``<prefix><count>-<4 hex>``)."""
    return SPEC.format(name=f"{prefix}{count}-{uuid.uuid4().hex[:4]}", count=count,
                       placement_group=str(placement_group).lower())
