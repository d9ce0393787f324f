"""The `plan`, `up`, `status`, `down` commands through the CLI (click runner) against
moto in server mode; and the CloudFormation template through cfn-lint."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from tests.integration.conftest import leftovers, write_spec

TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "cluster.yaml"


def _run(*args: str, input: str | None = None):
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def test_cfn_lint_passes_on_the_template():
    """The cfn-lint command as a user runs it (errors and warnings fail it)."""
    cfn_lint = Path(sys.executable).parent / "cfn-lint"
    proc = subprocess.run([str(cfn_lint), str(TEMPLATE)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_template_documents_every_parameter_and_output():
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    doc = yaml.load(TEMPLATE.read_text(), Loader=Loader)
    for section in ("Parameters", "Outputs"):
        for name, body in doc[section].items():
            assert body.get("Description"), f"{section}.{name} has no Description"
    ssh_cidr = doc["Parameters"]["SshCidr"]
    assert "Default" not in ssh_cidr  # the CIDR always comes from the spec or the caller


def test_plan_up_status_down_cli(cli_env, tmp_path):
    spec = str(write_spec(tmp_path, name=f"cli-{uuid.uuid4().hex[:6]}", count=2))
    name = Path(spec).read_text().split("\n")[0].split(": ")[1]
    offline = _run("plan", spec, "--offline", "--json")
    assert offline.exit_code == 0, offline.output
    data = json.loads(offline.stdout)
    assert data["stack"] == "create" and data["launch_indexes"] == [0, 1]
    assert data["choice"]["instance_type"] == "c5.large" and data["hourly_usd"] > 0

    online = _run("plan", spec, "--json")
    assert online.exit_code == 0, online.output
    assert json.loads(online.stdout)["changes"] is True

    up = _run("up", spec, "--yes", "--json", "--timeout", "120")
    assert up.exit_code == 0, up.output
    nodes = json.loads(up.stdout)["nodes"]
    assert len(nodes) == 2 and all(n["ssh_address"].startswith("127.") for n in nodes)
    assert all(n["host_key"] for n in nodes)

    again = _run("plan", spec, "--json")
    plan = json.loads(again.stdout)
    assert plan["changes"] is False and plan["stack"] == "none"
    assert "nothing to change" in _run("plan", spec).output

    status = _run("--region", "us-east-1", "status", name, "--json")
    assert status.exit_code == 0, status.output
    rows = json.loads(status.stdout)["nodes"]
    assert [r["role"] for r in rows] == ["master", "worker"]
    assert all(r["state"] == "running" and r["az"] and r["market"] == "on-demand"
               and r["price_per_hour"] and r["cost_so_far"] is not None for r in rows)
    table = CliRunner().invoke(cli, ["status", spec], env={"COLUMNS": "220"})
    assert "master" in table.output and "total:" in table.output
    everything = json.loads(_run("--region", "us-east-1", "status", "--json").stdout)
    assert {r["cluster"] for r in everything["nodes"]} >= {name}

    refused = _run("down", spec, input="y\n")  # CliRunner's stdin is no terminal
    assert refused.exit_code == 2 and "nothing deleted" in refused.output
    assert leftovers(name)["instances"]
    down = _run("down", spec, "--yes")
    assert down.exit_code == 0, down.output
    assert leftovers(name) == {}
    again = _run("down", spec, "--yes")  # gone, record and all: a typo looks the same
    assert again.exit_code == 1 and f"no cluster named {name} in us-east-1" in again.output


@pytest.fixture
def api_calls(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[str]:
    """Every AWS API operation this process starts (botocore's one entry point), in an
    environment with no credentials, no sandbox and an endpoint where nothing listens."""
    import botocore.client

    seen: list[str] = []
    real = botocore.client.BaseClient._make_api_call

    def record(self, operation_name, api_params):
        seen.append(operation_name)
        return real(self, operation_name, api_params)

    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call", record)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "CLUSTERKIT_SANDBOX",
                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    return seen


def test_bad_spec_exits_2_with_location_and_no_aws_call(tmp_path, api_calls):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: ok\nregion: us-east-1\nnodes:\n  count: 0\n")
    result = CliRunner().invoke(cli, ["up", str(bad)])
    assert result.exit_code == 2, result.output
    assert f"{bad}:4:" in result.output and "nodes.count" in result.output
    assert "Traceback" not in result.output
    assert api_calls == []


def test_plan_offline_makes_no_aws_call(tmp_path, api_calls):
    spec = write_spec(tmp_path, name="offl", count=2)
    result = CliRunner().invoke(cli, ["plan", str(spec), "--offline", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["choice"]["instance_type"] == "c5.large"
    assert api_calls == []


def test_runtime_failure_exits_1_with_hint_no_traceback(tmp_path, api_calls):
    """No credentials anywhere: `up` stops at its first AWS call with a hint."""
    result = CliRunner().invoke(cli, ["up", str(write_spec(tmp_path, name="nocred"))])
    assert result.exit_code == 1, result.output
    assert "no AWS credentials" in result.output and "hint:" in result.output
    assert "Traceback" not in result.output
    assert len(api_calls) == 1
