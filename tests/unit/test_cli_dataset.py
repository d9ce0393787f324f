"""How deploy-dataset's result is shown: one line per node with its volume, what deploy
did and the node's own verdict; the removed volumes; the JSON."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from clusterkit.cli.dataset import render_deploy
from clusterkit.cli.main import cli
from clusterkit.cluster.dataset.deploy import DeployResult, NodeDeploy

SID = "snap-0123456789abcdef0"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "sandbox-cpu.yaml"
LINE = "dataset: verified 3 files, 0.3 MB (size) manifest sha256:1aabe668ad2a"


def _text(result: DeployResult) -> str:
    out = io.StringIO()
    render_deploy(Console(file=out, width=120, color_system=None), result)
    return out.getvalue()


def test_first_deploy_lists_every_node_and_the_removed_volumes():
    nodes = tuple(NodeDeploy(i, f"i-{i}", f"vol-{i}", "created", LINE) for i in range(3))
    result = DeployResult("c", "us-east-1", SID, 1, nodes, removed=("vol-old",))
    text = _text(result)
    assert f"dataset {SID} deployed on 3 node(s) of c (1 GiB each)" in text
    for i in range(3):
        assert f"{i} i-{i} vol-{i} created  {LINE}" in text
    assert "removed the old dataset volume(s): vol-old" in text
    data = result.to_json()
    assert data["changed"] is True and data["removed"] == ["vol-old"]
    assert data["nodes"][2] == {"index": 2, "instance_id": "i-2", "volume_id": "vol-2",
                                "action": "created", "line": LINE}


def test_a_second_deploy_says_nothing_changed():
    nodes = (NodeDeploy(0, "i-0", "vol-0", "kept", LINE),)
    result = DeployResult("c", "us-east-1", SID, 1, nodes)
    assert "already deployed (nothing changed)" in _text(result)
    assert result.to_json()["changed"] is False


@pytest.mark.parametrize("given", ["snap-xyz", "snap-0123", "vol-0123456789abcdef0",
                                   "snap-0123456789ABCDEF0"])
def test_a_malformed_snapshot_id_exits_2_before_any_call(given, monkeypatch):
    import botocore.client

    called: list[str] = []
    monkeypatch.setattr(botocore.client.BaseClient, "_make_api_call",
                        lambda self, op, params: called.append(op))
    result = CliRunner().invoke(cli, ["deploy-dataset", str(EXAMPLE), "--snapshot", given,
                                      "--yes"])
    assert result.exit_code == 2, result.output
    assert f"--snapshot {given!r} is not a snapshot id" in result.output
    assert "snap-0123456789abcdef0" in result.output and called == []
