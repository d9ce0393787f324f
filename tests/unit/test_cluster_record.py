"""The local cluster record `up` writes: content, atomic write, and how status / down /
exec / ssh turn it (or its absence, or --region) into the regions to search."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

from clusterkit import statedir
from clusterkit.cluster.access import record
from clusterkit.cluster.access.target import open_cluster, resolve_target
from clusterkit.spec import loads

SPEC = """\
name: rec1
region: us-east-2
regions: [us-east-2, us-west-2]
nodes: {instance_types: [c5.large]}
"""


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(statedir.HOME_ENV, str(tmp_path))
    return tmp_path


def test_record_holds_regions_stack_hash_and_times(home):
    spec = loads(SPEC)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    record.save(spec, "us-east-2", now=t0)
    data = json.loads((home / "clusters" / "rec1" / "cluster.json").read_text())
    assert data["name"] == "rec1" and data["region"] == "us-east-2"
    assert data["regions"] == ["us-east-2", "us-west-2"]
    assert data["stack"] == "clusterkit-rec1"
    assert data["spec_hash"].startswith("sha256:") and len(data["spec_hash"]) == 71
    assert data["created"] == data["updated"] == "2026-01-01T00:00:00+00:00"
    record.save(spec, "us-west-2", now=datetime(2026, 1, 2, tzinfo=timezone.utc))
    rec = record.read("rec1")
    assert rec is not None and rec.region == "us-west-2"
    assert rec.created == "2026-01-01T00:00:00+00:00" and rec.updated.startswith("2026-01-02")
    assert rec.search == ["us-west-2", "us-east-2"]
    # written through a temp file that is renamed: nothing else is left in the directory
    assert sorted(os.listdir(home / "clusters" / "rec1")) == ["cluster.json"]


def test_spec_hash_follows_values_not_layout():
    a = loads(SPEC)
    b = loads("# a comment\n" + SPEC.replace("{instance_types: [c5.large]}",
                                             "\n  instance_types:\n    - c5.large"))
    c = loads(SPEC.replace("c5.large", "c5.xlarge"))
    assert record.spec_hash(a) == record.spec_hash(b) != record.spec_hash(c)


def test_unreadable_record_is_no_record(home):
    path = home / "clusters" / "rec2" / "cluster.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"name": "rec2"')  # cut short
    assert record.read("rec2") is None


def test_regions_to_search(home, tmp_path):
    # no record, no --region: every enabled region (the empty list)
    assert resolve_target("rec1", None) == ("rec1", [], None)
    assert resolve_target("rec1", "eu-west-1") == ("rec1", ["eu-west-1"], None)  # narrows
    record.save(loads(SPEC), "us-west-2")
    assert resolve_target("rec1", None)[1] == ["us-west-2", "us-east-2"]
    assert resolve_target("rec1", "eu-west-1")[1] == ["eu-west-1"]
    spec_file = tmp_path / "rec1.yaml"
    spec_file.write_text(SPEC.replace("regions: [us-east-2, us-west-2]\n", ""))
    name, regions, spec = resolve_target(str(spec_file), None)
    assert (name, regions) == ("rec1", ["us-east-2", "us-west-2"]) and spec is not None
    assert resolve_target(str(spec_file), "eu-west-1")[1] == ["eu-west-1"]
    assert resolve_target(None, None) == (None, [], None)  # status: every cluster, everywhere


def test_open_cluster_is_resolve_target_and_a_loaded_spec_keeps_its_own_regions(home,
                                                                                 tmp_path):
    record.save(loads(SPEC), "us-west-2")
    ref = open_cluster("rec1")
    assert (ref.name, ref.regions, ref.spec) == ("rec1", ("us-west-2", "us-east-2"), None)
    assert open_cluster("rec1", "eu-west-1").regions == ("eu-west-1",)
    spec = loads(SPEC.replace("regions: [us-east-2, us-west-2]\n", ""))
    loaded = open_cluster(spec)  # `up`/`plan`: where this spec may create, not the record's
    assert (loaded.name, loaded.regions, loaded.spec) == ("rec1", spec.regions, spec)
    assert open_cluster(None).name is None  # status: every cluster
