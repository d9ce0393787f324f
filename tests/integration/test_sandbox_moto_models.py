"""sandbox/moto_models.py's read of moto's instances, on moto's in-process backend (the
sandbox daemon reads the same models): a terminated instance the agent is done with is
left out of every later read, and nothing else is."""

from __future__ import annotations

import boto3
from moto import mock_aws

from clusterkit_sandbox.moto_models import read_instances

TAGS = [{"ResourceType": "instance", "Tags": [{"Key": "clusterkit:cluster", "Value": "mm"}]}]


def test_finished_instances_are_left_out_and_only_they():
    with mock_aws():
        ec2 = boto3.client("ec2", "us-east-1", aws_access_key_id="t",
                           aws_secret_access_key="t")
        made = ec2.run_instances(ImageId="ami-12c6146b", MinCount=2, MaxCount=2,
                                 InstanceType="c5.large", TagSpecifications=TAGS)
        gone, running = (i["InstanceId"] for i in made["Instances"])
        ec2.terminate_instances(InstanceIds=[gone])
        states = {v.instance_id: v.state for v in read_instances()[0]}
        assert states == {gone: "terminated", running: "running"}
        assert [v.instance_id for v in read_instances({gone})[0]] == [running]
        # a running instance is read whatever the caller says: only the terminated stay out
        assert {v.instance_id for v in read_instances({running})[0]} == {gone, running}
