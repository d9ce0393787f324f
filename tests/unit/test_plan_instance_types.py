"""Issue 36 item 3: `nodes.instance_types` is the set of types the nodes may be, ranked
by $ per GPU-hour (without GPUs: per vCPU-hour), not an order of preference; a list that
mixes GPU and CPU types uses only the GPU types, and `validate`, `plan` and `up` say so."""

from __future__ import annotations

from pathlib import Path

import yaml
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.spec.schema import json_schema

MIXED_WARNING = ("warning: nodes.instance_types: mixes GPU types (p4d.24xlarge) and types "
                 "without GPUs (c5.large): the types without GPUs are never used")


def _plan(tmp_path: Path, types: list[str]) -> str:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump({"name": "mixed", "region": "us-east-1",
                                    "nodes": {"count": 3, "instance_types": types,
                                              "market": "on-demand"}}))
    result = CliRunner().invoke(cli, ["plan", "--offline", str(path)])
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())  # words: the console wraps long lines


def test_plan_warns_beside_the_launch_when_the_list_mixes_gpu_and_cpu_types(tmp_path):
    out = _plan(tmp_path, ["c5.large", "p4d.24xlarge"])
    launch = out.index("launch 3 node(s)")
    assert "p4d.24xlarge" in out[launch:out.index(MIXED_WARNING)]
    assert out.index(MIXED_WARNING) < out.index("new spending:")
    assert "not an order of preference" in out


def test_a_list_of_one_kind_has_no_such_warning(tmp_path):
    assert "mixes GPU types" not in _plan(tmp_path, ["c5.large", "c5.xlarge"])
    assert "mixes GPU types" not in _plan(tmp_path, ["p4d.24xlarge", "p5.48xlarge"])


def test_the_key_says_the_rule_where_it_is_described():
    nodes = json_schema()["properties"]["nodes"]["properties"]
    text = nodes["instance_types"]["description"]
    assert "not an order of preference" in text and "per GPU-hour" in text
    assert "per vCPU-hour" in text
    root = Path(__file__).parents[2]
    for page in [root / "README.md", *sorted((root / "docs").rglob("*.md"))]:
        assert "in order of preference" not in page.read_text(), page
