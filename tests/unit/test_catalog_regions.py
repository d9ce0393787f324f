"""catalog.regions: the regions `validate` and `--region` accept, and the did-you-mean."""

from __future__ import annotations

import pytest

from clusterkit.aws.endpoints import known_regions
from clusterkit.catalog import regions
from clusterkit.errors import UsageError


def test_every_listed_region_is_one_botocore_knows():
    """No typo in the list: each name is in botocore's endpoint data (the runtime check
    of spot's --regions and of the pins uses that data directly)."""
    assert set(known_regions()) >= regions.KNOWN
    assert {"us-east-1", "eu-west-1", "ap-northeast-1", "cn-north-1", "us-gov-west-1"} <= \
        regions.KNOWN


@pytest.mark.parametrize(("typed", "hint"), [
    ("us-east-9", "did you mean us-east-2 or us-east-1?"),
    ("eu-wst-1", "did you mean eu-west-1"),
    ("us-west2", "did you mean us-west-2"),
    ("mars-north-1", "a region looks like us-east-1 or eu-west-2"),
])
def test_an_unknown_region_is_a_usage_error_with_a_did_you_mean(typed, hint):
    with pytest.raises(UsageError) as caught:
        regions.check_region(typed, "--region")
    assert caught.value.exit_code == 2
    assert caught.value.message == f"--region: {typed!r} is not an AWS region"
    assert hint in caught.value.hint


def test_a_known_region_passes():
    assert regions.check_region("ap-southeast-2", "AWS_REGION") == "ap-southeast-2"
