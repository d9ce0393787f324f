"""The AWS regions clusterkit knows (EC2's, in every partition), for checking a region
before any call: a typo such as ``us-east-9`` would otherwise send every request to a
host that does not exist, and retries make that slow. PURE data.

From botocore's endpoint data (``Session().get_available_regions("ec2", partition)``);
tests/unit/test_catalog_regions.py checks every name here against it.
"""

from __future__ import annotations

import difflib

from clusterkit.errors import UsageError

REGIONS: dict[str, tuple[str, ...]] = {
    "aws": (
        "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2",
        "ap-northeast-3", "ap-south-1", "ap-south-2", "ap-southeast-1", "ap-southeast-2",
        "ap-southeast-3", "ap-southeast-4", "ap-southeast-5", "ap-southeast-6",
        "ap-southeast-7", "ca-central-1", "ca-west-1", "eu-central-1", "eu-central-2",
        "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2", "eu-west-3",
        "il-central-1", "me-central-1", "me-south-1", "mx-central-1", "sa-east-1",
        "us-east-1", "us-east-2", "us-west-1", "us-west-2"),
    "aws-cn": ("cn-north-1", "cn-northwest-1"),
    "aws-us-gov": ("us-gov-east-1", "us-gov-west-1"),
    "aws-iso": ("us-iso-east-1", "us-iso-west-1"),
    "aws-iso-b": ("us-isob-east-1", "us-isob-west-1"),
    "aws-iso-e": ("eu-isoe-west-1",),
    "aws-iso-f": ("us-isof-east-1", "us-isof-south-1"),
}
KNOWN = frozenset(r for names in REGIONS.values() for r in names)
UPGRADE_HINT = "a region AWS opened after this clusterkit was released needs a newer clusterkit"


def is_known(region: str) -> bool:
    return region in KNOWN


def suggestion(region: str) -> str:
    """"did you mean us-east-1 or us-east-2?", or what to do when nothing is close."""
    close = difflib.get_close_matches(region, sorted(KNOWN), n=2, cutoff=0.75)
    if close:
        return f"did you mean {' or '.join(close)}?"
    return f"a region looks like us-east-1 or eu-west-2; {UPGRADE_HINT}"


def check_region(region: str, where: str) -> str:
    """``region`` when AWS has it, else UsageError (exit 2) naming ``where`` it came from
    (--region, AWS_REGION, ...) with a did-you-mean."""
    if not is_known(region):
        raise UsageError(f"{where}: {region!r} is not an AWS region", suggestion(region))
    return region
