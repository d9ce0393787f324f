"""The CLI conventions against moto in server mode (EC2 emulated over HTTP on 127.0.0.1):
`status NAME` of an unknown cluster exits 1 (JSON error under --json), `--region` after
the command name finds a cluster in that region, and a NAME that is a path deletes
nothing."""

from __future__ import annotations

import json
import uuid

import boto3
import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from tests.integration.conftest import AMI

CLUSTER_TAG = "clusterkit:cluster"


@pytest.fixture
def cli_moto(moto_env: str, monkeypatch: pytest.MonkeyPatch, tmp_path) -> str:
    """moto_env without sandbox mode: the CLI talks to the moto endpoint directly."""
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path / "state"))
    return moto_env


def _launch(endpoint: str, region: str, cluster: str) -> str:
    ec2 = boto3.client("ec2", endpoint_url=endpoint, region_name=region)
    tags = [{"Key": CLUSTER_TAG, "Value": cluster}, {"Key": "clusterkit:index", "Value": "0"},
            {"Key": "clusterkit:role", "Value": "master"}]
    out = ec2.run_instances(ImageId=AMI, InstanceType="c5.large", MinCount=1, MaxCount=1,
                            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}])
    return out["Instances"][0]["InstanceId"]


def _terminate(endpoint: str, region: str, instance_id: str) -> None:
    boto3.client("ec2", endpoint_url=endpoint, region_name=region).terminate_instances(
        InstanceIds=[instance_id])


def test_status_of_an_unknown_cluster_exits_1(cli_moto):
    name = f"nope-{uuid.uuid4().hex[:6]}"
    text = CliRunner().invoke(cli, ["status", name, "--region", "us-east-2"])
    assert text.exit_code == 1, text.output
    assert f"no cluster {name} in us-east-2" in text.stderr and text.stdout == ""
    as_json = CliRunner().invoke(cli, ["status", name, "--region", "us-east-2", "--json"])
    assert as_json.exit_code == 1
    error = json.loads(as_json.stdout)
    assert error["exit_code"] == 1 and error["error"] == f"no cluster {name} in us-east-2"


def test_region_after_the_command_finds_the_cluster(cli_moto):
    name = f"reg-{uuid.uuid4().hex[:6]}"
    instance = _launch(cli_moto, "us-east-2", name)
    try:
        result = CliRunner().invoke(cli, ["status", name, "--region", "us-east-2", "--json"])
        assert result.exit_code == 0, result.output
        rows = json.loads(result.stdout)["nodes"]
        assert [(r["instance_id"], r["region"]) for r in rows] == [(instance, "us-east-2")]
        table = CliRunner().invoke(cli, ["status", name, "--region", "us-east-2"])
        assert table.exit_code == 0 and "master" in table.stdout
    finally:
        _terminate(cli_moto, "us-east-2", instance)


def test_down_of_a_path_deletes_nothing(cli_moto, tmp_path, monkeypatch):
    """Before: `down ../..` reached known_hosts.forget -> rmtree(<state>/clusters/../..)."""
    sentinel = tmp_path / "state" / "keep"
    sentinel.mkdir(parents=True)
    (tmp_path / "state" / "clusters" / "a" / "b").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "state" / "clusters")
    for target in ("../..", "..", "a/b", str(sentinel), "/"):
        result = CliRunner().invoke(cli, ["down", target, "--yes", "--region", "us-east-1"])
        assert result.exit_code == 2, (target, result.output)
        assert "not a cluster name" in result.stderr
    assert sentinel.is_dir() and (tmp_path / "state" / "clusters" / "a" / "b").is_dir()
