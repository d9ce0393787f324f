"""aws.tags: tags in the shapes the AWS APIs take and return."""

from __future__ import annotations

import json

from clusterkit.aws.tags import cluster_filter, tag_specs, to_dict, to_list
from clusterkit.kinds import Role


def test_list_and_dict_round_trip():
    tags = {"clusterkit:cluster": "c1", "Name": "c1-master-0", "empty": ""}
    assert to_list(tags) == [{"Key": "clusterkit:cluster", "Value": "c1"},
                             {"Key": "Name", "Value": "c1-master-0"},
                             {"Key": "empty", "Value": ""}]
    assert to_dict(to_list(tags)) == tags
    assert to_dict(None) == {} == to_dict([])


def test_enum_values_go_out_as_their_text():
    tags = to_list({"clusterkit:role": Role.MASTER})
    assert json.dumps(tags) == '[{"Key": "clusterkit:role", "Value": "master"}]'
    assert f"{tags[0]['Value']}" == str(tags[0]["Value"]) == "master"


def test_cluster_filter_and_tag_specs():
    assert cluster_filter("c1") == [{"Name": "tag:clusterkit:cluster", "Values": ["c1"]}]
    assert tag_specs(["instance", "volume"], {"a": "b"}) == [
        {"ResourceType": "instance", "Tags": [{"Key": "a", "Value": "b"}]},
        {"ResourceType": "volume", "Tags": [{"Key": "a", "Value": "b"}]}]


def test_no_tags_give_no_tag_specification():
    """EC2 refuses a TagSpecification without tags (InvalidParameterValue)."""
    assert tag_specs(["snapshot"], {}) == []
