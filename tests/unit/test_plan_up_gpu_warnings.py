"""Issue 15 item 10: the CUDA warning validate gives (mxnet-cu112 on a Hopper p5) is shown
by `plan` and `up` beside the chosen type, and `train` can ask for it (cuda_warnings)."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.cluster.provision.up import _check_plan
from clusterkit.cluster.runtime import Runtime
from clusterkit.events import Collect, Kind
from clusterkit.plan.spend import plan_lines
from clusterkit.plan.up import UpPlan, gpu_warnings, plan_up
from clusterkit.spec import loads
from clusterkit.spec.checks import cuda_warnings
from tests import support


def spec_text(itype: str, packages: list[str]) -> str:
    return yaml.safe_dump({
        "name": "gpu", "region": "us-east-1", "ssh": {"key_name": "k"},
        "nodes": {"count": 2, "instance_types": [itype], "market": "on-demand"},
        "train": {"framework": "mxnet", "command": "python3 train.py",
                  "packages": packages}})


def plan_output(tmp_path: Path, itype: str, packages: list[str], *extra: str) -> str:
    path = tmp_path / "gpu.yaml"
    path.write_text(spec_text(itype, packages))
    result = CliRunner().invoke(cli, ["plan", "--offline", str(path), *extra])
    assert result.exit_code == 0, result.output
    return result.output


def test_plan_shows_the_cuda_warning_under_the_chosen_type(tmp_path):
    # words, not lines: the console wraps long lines at its width (80 without a terminal)
    out = " ".join(plan_output(tmp_path, "p5.48xlarge", ["mxnet-cu112==1.9.1"]).split())
    launch = out.index("launch 2 node(s)")
    warning = out.index("warning: train.packages[0]: mxnet-cu112==1.9.1")
    assert launch < warning < out.index("new spending:")
    assert "p5.48xlarge" in out[launch:warning]
    text = out[warning:out.index("new spending:")]
    assert "CUDA 11.2" in text and "Hopper" in text and "p5.48xlarge" in text


def test_plan_json_carries_the_warning(tmp_path):
    out = json.loads(plan_output(tmp_path, "p5.48xlarge", ["mxnet-cu112"], "--json"))
    assert len(out["warnings"]) == 1 and "Hopper" in out["warnings"][0]


def test_plan_is_quiet_where_the_build_fits(tmp_path):
    out = plan_output(tmp_path, "p4d.24xlarge", ["mxnet-cu112==1.9.1"])
    assert "warning" not in out and "p4d.24xlarge" in out


def test_cuda_warnings_for_train():
    spec = loads(spec_text("p5.48xlarge", ["mxnet-cu112==1.9.1"]))
    assert len(cuda_warnings(spec, "p5.48xlarge")) == 1
    assert cuda_warnings(spec, "p4d.24xlarge") == []
    assert cuda_warnings(spec, "z9.unknown") == []
    cpu = loads(spec_text("c5.large", []))
    assert cuda_warnings(cpu, "c5.large") == []


def _plan(itype: str, spec_itype: str = "p5.48xlarge") -> UpPlan:
    spec = loads(spec_text(spec_itype, ["mxnet-cu112==1.9.1"]))
    return plan_up(spec, support.observed(spec, stack="CREATE_COMPLETE", candidates=[
        support.offer(itype, "on-demand", 98.32)]))


def test_up_warns_after_the_spend_lines():
    seen = Collect()
    _check_plan(Runtime(session=None, report=seen), _plan("p5.48xlarge"), yes=True,
                confirm=None)
    kinds = [e.kind for e in seen.events]
    assert Kind.WARNING in kinds and kinds.index(Kind.WARNING) > 0
    assert "Hopper" in seen.texts(Kind.WARNING)[0]
    assert any("p5.48xlarge" in t for t in seen.texts(Kind.INFO))


def test_gpu_warnings_follow_the_type_of_the_launch():
    spec = loads(spec_text("p5.48xlarge", ["mxnet-cu112==1.9.1"]))
    assert gpu_warnings(spec, _plan("p4d.24xlarge")) == ()
    plan = _plan("p5.48xlarge")
    assert gpu_warnings(spec, plan) == tuple(cuda_warnings(spec, "p5.48xlarge"))
    lines = plan_lines(plan)
    launch = next(i for i, line in enumerate(lines) if line.startswith("launch 2"))
    assert lines[launch + 1].startswith("  warning: ")
