"""Unknown regions and a --region outside the spec are refused before any AWS call
(exit 2), for `spot`, `plan` and `up`; the list of known regions is botocore's own
endpoint data. No endpoint is needed: any API call would fail the test at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterkit.aws.endpoints import check_regions, known_regions
from clusterkit.cli.main import cli
from clusterkit.errors import UsageError

SPEC = """\
name: rgn
region: us-east-1
regions: [{regions}]
nodes:
  count: 2
  instance_types: [c5.large]
  market: on-demand
"""


@pytest.fixture
def no_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Fails at the first AWS API operation (botocore's one entry point)."""
    import botocore.client

    seen: list[str] = []

    def refuse(self, operation_name, api_params):
        seen.append(operation_name)
        raise AssertionError(f"AWS call {operation_name} made")

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", refuse)
    for name in ("CLUSTERKIT_SANDBOX", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    return seen


def _spec(tmp_path: Path, regions: str) -> str:
    path = tmp_path / "rgn.yaml"
    path.write_text(SPEC.format(regions=regions))
    return str(path)


def test_known_regions_come_from_botocore() -> None:
    known = known_regions()
    assert {"us-east-1", "eu-west-1", "cn-north-1", "us-gov-west-1"} <= set(known)
    assert "us-east-9" not in known and "mars-north-9" not in known
    check_regions(["us-east-1", "ap-southeast-2"])
    with pytest.raises(UsageError) as info:
        check_regions(["us-east-1", "us-east-9"])
    assert info.value.message == "'us-east-9' is not an AWS region"
    assert info.value.hint == "did you mean us-east-2 or us-east-1?"


@pytest.mark.parametrize("args", [
    ["spot", "--instance-types", "p4d.24xlarge", "--regions", "us-east-1,us-east-9"],
    ["--region", "us-east-9", "spot", "--instance-types", "p4d.24xlarge"],
])
def test_spot_unknown_region_exits_2_before_any_call(no_calls: list[str], args) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "'us-east-9' is not an AWS region" in result.output
    assert "did you mean us-east-2 or us-east-1?" in result.output
    assert "<html" not in result.output.lower() and no_calls == []


@pytest.mark.parametrize("command", [["plan"], ["plan", "--offline"], ["up", "--yes"]])
def test_spec_with_unknown_region_exits_2_before_any_call(no_calls: list[str], tmp_path: Path,
                                                         command: list[str]) -> None:
    spec = _spec(tmp_path, "us-east-1, us-east-9")
    result = CliRunner().invoke(cli, [*command[:1], spec, *command[1:]])
    assert result.exit_code == 2, result.output
    assert "'us-east-9' is not an AWS region" in result.output and no_calls == []


@pytest.mark.parametrize("command", [["plan"], ["plan", "--offline"], ["up", "--yes"]])
def test_region_option_outside_the_spec_is_rejected(no_calls: list[str], tmp_path: Path,
                                                    command: list[str]) -> None:
    spec = _spec(tmp_path, "us-east-1, us-west-2")
    result = CliRunner().invoke(cli, ["--region", "eu-west-1", *command[:1], spec,
                                      *command[1:]])
    assert result.exit_code == 2, result.output
    assert "--region eu-west-1 is not among the regions" in result.output
    assert "us-east-1, us-west-2" in result.output and no_calls == []


def test_region_option_is_honoured_offline(no_calls: list[str], tmp_path: Path) -> None:
    """c5.large on-demand costs the same in both: the spec order picks us-east-1, and
    --region us-west-2 moves the choice there."""
    import json

    spec = _spec(tmp_path, "us-east-1, us-west-2")
    plain = CliRunner().invoke(cli, ["--json", "plan", spec, "--offline"])
    pinned = CliRunner().invoke(cli, ["--json", "--region", "us-west-2", "plan", spec,
                                      "--offline"])
    assert plain.exit_code == 0 and pinned.exit_code == 0, plain.output + pinned.output
    assert json.loads(plain.stdout)["choice"]["region"] == "us-east-1"
    assert json.loads(pinned.stdout)["choice"]["region"] == "us-west-2"
