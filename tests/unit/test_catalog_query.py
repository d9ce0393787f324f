"""catalog.query: what `clusterkit spot` searches, options merged over the spec. PURE."""

from __future__ import annotations

import pytest

from clusterkit.catalog.query import SpotQuery, merge_query
from clusterkit.errors import UsageError
from clusterkit.spec import loads

SPEC = """\
name: q
region: us-west-2
regions: [us-west-2, us-east-1]
nodes:
  count: 4
  instance_types: [p4d.24xlarge, p5.48xlarge]
  max_price: 20
"""


def test_spec_alone():
    assert merge_query(loads(SPEC)) == SpotQuery(
        ["p4d.24xlarge", "p5.48xlarge"], ["us-west-2", "us-east-1"], 4, 20.0)


def test_options_replace_the_spec():
    got = merge_query(loads(SPEC), instance_types=["g5.xlarge"], regions=["eu-west-1"],
                      count=2, default_region="ap-south-1")
    assert got == SpotQuery(["g5.xlarge"], ["eu-west-1"], 2, 20.0)


def test_no_spec():
    assert merge_query(None, instance_types=["c5.large"], default_region="us-east-1") == \
        SpotQuery(["c5.large"], ["us-east-1"], 1, None)


@pytest.mark.parametrize(("kwargs", "says"), [
    ({}, "no instance types"),
    ({"instance_types": ["c5.large"]}, "no region"),
    ({"instance_types": ["c5.large"], "regions": ["us-east-1"], "count": 0}, "at least 1"),
])
def test_usage_errors(kwargs, says):
    with pytest.raises(UsageError, match=says) as caught:
        merge_query(None, **kwargs)
    assert caught.value.exit_code == 2
