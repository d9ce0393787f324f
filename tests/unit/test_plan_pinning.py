"""Region pinning as data (clusterkit/plan/pinning.py): what a spec pins, which regions
qualify, the per-resource lines `plan` prints and the error when none qualifies."""

from __future__ import annotations

import pytest

from clusterkit import spec as spec_api
from clusterkit.errors import UsageError
from clusterkit.plan.pinning import (
    FOUND,
    MISSING,
    PinKind,
    Pinned,
    PinReport,
    allowed_regions,
    pinned_resources,
)

SPEC = """\
name: pins
region: us-east-1
regions: [us-east-1, us-west-2, eu-west-1]
nodes:
  instance_types: [g5.xlarge]
  image: {id: ami-0123456789abcdef0}
ssh: {key_name: my-key}
storage:
  efs: {file_system_id: fs-0123456789abcdef0}
  dataset: {snapshot: snap-0123456789abcdef0}
"""
SNAP = Pinned(PinKind.SNAPSHOT, "snap-0123456789abcdef0", "storage.dataset.snapshot")
KEY = Pinned(PinKind.KEY_PAIR, "my-key", "ssh.key_name")


def test_pinned_resources_of_a_spec() -> None:
    pins = pinned_resources(spec_api.loads(SPEC, "pins.yaml"))
    assert [(p.kind, p.id, p.path) for p in pins] == [
        (PinKind.IMAGE, "ami-0123456789abcdef0", "nodes.image.id"),
        (PinKind.KEY_PAIR, "my-key", "ssh.key_name"),
        (PinKind.FILE_SYSTEM, "fs-0123456789abcdef0", "storage.efs.file_system_id"),
        (PinKind.SNAPSHOT, "snap-0123456789abcdef0", "storage.dataset.snapshot")]
    plain = spec_api.loads("name: p\nregion: us-east-1\nnodes:\n  instance_types: [g5.xlarge]\n")
    assert pinned_resources(plain) == []  # AMI by name, key pair imported: nothing pinned


def test_region_option_is_honoured_or_rejected() -> None:
    spec = spec_api.loads(SPEC, "pins.yaml")
    assert allowed_regions(spec, None) == ["us-east-1", "us-west-2", "eu-west-1"]
    assert allowed_regions(spec, "us-west-2") == ["us-west-2"]
    with pytest.raises(UsageError) as info:
        allowed_regions(spec, "ap-south-1")
    assert info.value.exit_code == 2
    assert "ap-south-1" in info.value.message and "us-east-1, us-west-2, eu-west-1" in \
        info.value.message


REGIONS = ("us-east-1", "us-west-2", "eu-west-1")
CASES = [
    # (snapshot verdicts, key pair verdicts) per region -> qualifying regions
    ({"us-east-1": MISSING, "us-west-2": FOUND, "eu-west-1": MISSING},
     {"us-east-1": FOUND, "us-west-2": FOUND, "eu-west-1": MISSING}, ["us-west-2"]),
    ({"us-east-1": "pending, not completed", "us-west-2": FOUND, "eu-west-1": FOUND},
     {"us-east-1": FOUND, "us-west-2": FOUND, "eu-west-1": FOUND}, ["us-west-2", "eu-west-1"]),
    ({"us-east-1": FOUND, "us-west-2": MISSING, "eu-west-1": MISSING},
     {"us-east-1": MISSING, "us-west-2": FOUND, "eu-west-1": MISSING}, []),
]


@pytest.mark.parametrize(("snap", "key", "want"), CASES)
def test_qualifying_regions(snap: dict, key: dict, want: list[str]) -> None:
    assert PinReport(REGIONS, {SNAP: snap, KEY: key}).qualifying == want


def test_lines_say_found_missing_and_unusable() -> None:
    report = PinReport(REGIONS, {SNAP: {"us-east-1": "pending, not completed",
                                        "us-west-2": FOUND, "eu-west-1": MISSING}})
    assert report.lines() == [
        "snapshot snap-0123456789abcdef0 (storage.dataset.snapshot): found in us-west-2; "
        "missing in eu-west-1; pending, not completed in us-east-1"]


def test_failure_names_each_resource_and_the_regions() -> None:
    report = PinReport(REGIONS[:2], {SNAP: {"us-east-1": MISSING, "us-west-2": MISSING},
                                     KEY: {"us-east-1": FOUND, "us-west-2": MISSING}})
    err = report.failure()
    assert err.exit_code == 2
    assert "looked in us-east-1, us-west-2" in err.message
    assert "snap-0123456789abcdef0 (storage.dataset.snapshot): missing in us-east-1, " \
        "us-west-2" in err.message
    assert "key pair my-key (ssh.key_name): found in us-east-1; missing in us-west-2" \
        in err.message
