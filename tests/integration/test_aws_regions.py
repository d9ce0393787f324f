"""aws.regions against the emulator over HTTP: the regions the account may use."""

from __future__ import annotations

from clusterkit.aws.regions import enabled_regions
from clusterkit.aws.session import make_session
from tests.integration.conftest import REGION


def test_enabled_regions(moto_env):
    regions = enabled_regions(make_session(REGION))
    assert regions == sorted(regions)
    assert {"us-east-1", "us-west-2", "eu-west-1"} <= set(regions)
