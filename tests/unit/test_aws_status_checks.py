"""aws/status_checks.py: an instance's worse check of its system and instance checks."""

from __future__ import annotations

import pytest

from clusterkit.aws.status_checks import worse_check


@pytest.mark.parametrize(("system", "instance", "worse"), [
    ("ok", "ok", "ok"), ("impaired", "ok", "impaired"), ("ok", "impaired", "impaired"),
    ("initializing", "ok", "initializing"), (None, "ok", "insufficient-data"),
    ("insufficient-data", "impaired", "impaired"), ("weird-new-value", "ok", "weird-new-value"),
    ("weird-new-value", "impaired", "impaired"),
])
def test_the_worse_check_wins(system: str | None, instance: str, worse: str):
    status = {"InstanceId": "i-1", "InstanceStatus": {"Status": instance}}
    if system is not None:
        status["SystemStatus"] = {"Status": system}
    assert worse_check(status) == worse
