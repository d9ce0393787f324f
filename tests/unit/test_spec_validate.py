"""Spec building and validation: defaults, locations, warnings vs errors, the public API
and the `validate` / `schema` commands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from clusterkit import spec as spec_api
from clusterkit.cli.main import cli
from clusterkit.errors import SpecError
from clusterkit.spec import model

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))
BASE = "name: t\nregion: us-east-1\nnodes:\n  instance_types: [{types}]\n"


def _issues(text: str, types: str = "g5.xlarge"):
    return spec_api.checks(BASE.format(types=types) + text, "t.yaml")


def _paths(issues, level="error"):
    return {i.path for i in issues if i.level == level}


def test_minimal_spec_gets_tutorial_defaults():
    spec = spec_api.loads(BASE.format(types="p4d.24xlarge"), "t.yaml")
    assert spec.nodes == model.Nodes(instance_types=("p4d.24xlarge",))
    assert spec.nodes.market == "spot" and spec.nodes.placement_group
    assert spec.ssh == model.Ssh() and spec.ssh.port == 22 and spec.ssh.user == "ubuntu"
    assert spec.storage == model.Storage() and spec.train is None
    assert spec.regions == ("us-east-1",) and dict(spec.tags) == {}


def test_sections_written_empty_mean_on_with_defaults():
    spec = spec_api.loads(BASE.format(types="g5.xlarge") +
                          "storage:\n  scratch:\n  efs: {}\n  dataset:\ntrain:\n", "t")
    assert spec.storage.scratch == model.Scratch() and spec.storage.efs.create
    assert spec.storage.dataset == model.Dataset() and spec.train == model.Train()


def test_efs_tls_is_on_unless_the_spec_says_false_and_only_a_boolean():
    spec = spec_api.loads(BASE.format(types="g5.xlarge") + "storage:\n  efs:\n", "t")
    assert spec.storage.efs.tls is True
    spec = spec_api.loads(BASE.format(types="g5.xlarge") + "storage:\n  efs:\n"
                          "    file_system_id: fs-0123456789abcdef0\n    tls: false\n", "t")
    assert spec.storage.efs.tls is False
    for value in ('"false"', "0", "off-ish", "[]"):
        spec, issues = _issues(f"storage:\n  efs:\n    tls: {value}\n")
        assert spec is None and _paths(issues) == {"storage.efs.tls"}, value
        assert "expected true or false" in issues[0].message


def test_locations_for_every_written_path():
    spec = spec_api.loads(BASE.format(types="g5.xlarge, g5.2xlarge") +
                          "train:\n  env:\n    FOO: 1\n", "t.yaml")
    assert str(spec.where("nodes.instance_types[1]")) == "t.yaml:4:31"
    assert str(spec.where("train.env.FOO")) == "t.yaml:7:10"
    assert spec.train.env["FOO"] == "1"
    assert spec.where("nodes.count") == spec.locations["nodes"]  # default: nearest parent


def test_image_id_drops_the_default_name_filter():
    spec = spec_api.loads(BASE.format(types="g5.xlarge") +
                          "  image: {id: ami-0123456789abcdef0}\n", "t")
    assert spec.nodes.image == model.Image(id="ami-0123456789abcdef0", name=None)


def test_regions_always_start_with_region():
    spec = spec_api.loads(BASE.format(types="g5.xlarge") + "regions: [us-west-2, us-east-1]\n")
    assert spec.regions == ("us-east-1", "us-west-2")


def test_load_raises_spec_error_with_every_issue(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(BASE.format(types="c5.large") + "  count: 0\nssh: {port: 0}\n")
    with pytest.raises(SpecError) as exc:
        spec_api.load(str(f))
    assert {i.path for i in exc.value.issues} >= {"nodes.count", "ssh.port"}
    assert exc.value.exit_code == 2 and str(f) in exc.value.message


def test_warnings_do_not_raise():
    spec, issues = _issues("train:\n  packages: [mxnet-cu112]\n", types="g6.xlarge")
    assert spec is not None
    assert _paths(issues, "warning") == {"train.packages[0]"}
    assert "sm_89" in issues[0].message and "11.2" in issues[0].message


@pytest.mark.parametrize("types,package,warned", [
    ("p4d.24xlarge", "mxnet-cu112", False),  # Ampere sm_80: CUDA 11.2 targets it
    ("g5.xlarge", "mxnet-cu112", False),  # Ampere sm_86
    ("g6.xlarge", "mxnet-cu112", True),  # Ada sm_89
    ("p5.48xlarge", "mxnet-cu112", True),  # Hopper sm_90
    ("p5.48xlarge", "cupy-cuda118", False),
    ("p3.2xlarge", "nvidia-cudnn-cu13", False),  # whole major version: no claim
    ("p5.48xlarge", "mxnet-cu102", True),
])
def test_cuda_build_vs_gpu_architecture(types, package, warned):
    spec, issues = _issues(f"train:\n  packages: [{package}]\n", types=types)
    assert spec is not None
    assert ("train.packages[0]" in _paths(issues, "warning")) == warned


def test_gpu_package_on_cpu_type_is_an_error_naming_the_type():
    spec, issues = _issues("train:\n  packages: [numpy, mxnet-cu112]\n", types="g5.xlarge, c5.large")
    assert spec is None
    err = [i for i in issues if i.path == "train.packages[1]"][0]
    assert "c5.large" in err.message and err.hint


def test_node_limit_and_override():
    _, issues = _issues("  count: 65\n")
    assert "nodes.count" in _paths(issues)
    spec, _ = _issues("  count: 65\n  allow_large: true\n")
    assert spec is not None and spec.nodes.count == 65


def test_unknown_type_is_a_warning_with_suggestion():
    spec, issues = _issues("", types="g5.xlarg3")
    assert spec is None  # the syntax check fails: 'xlarg3' is not a size
    spec, issues = _issues("", types="g9.xlarge")
    assert spec is not None
    warn = [i for i in issues if i.level == "warning"][0]
    assert warn.path == "nodes.instance_types[0]" and "catalog" in warn.message


@pytest.mark.parametrize(("types", "level", "suggested"), [
    ("g5.21xlarge", "error", "g5.24xlarge"),  # a size AWS does not offer in a known family
    ("p4d.48xlarge", "error", "p4d.24xlarge"),
    ("p5.2xlarge", "error", "p5.4xlarge"),
    ("c5.4xlarge", "warning", None),  # the catalog holds c5 only in part: may exist
    ("p6-b200.48xlarge", "warning", None),  # a family the catalog does not know yet
])
def test_type_aws_does_not_offer_is_an_error(types, level, suggested):
    spec, issues = _issues("", types=types)
    found = [i for i in issues if i.path == "nodes.instance_types[0]"]
    assert [i.level for i in found] == [level] and (spec is None) == (level == "error")
    if suggested:
        assert "not an instance type AWS offers" in found[0].message
        assert suggested in (found[0].hint or "")


def test_spot_max_price_above_on_demand_warns():
    spec, issues = _issues("  max_price: 100\n", types="g5.xlarge")
    assert spec is not None and "nodes.max_price" in _paths(issues, "warning")
    _, issues = _issues("  max_price: 0.5\n", types="g5.xlarge")
    assert "nodes.max_price" not in _paths(issues, "warning")


def test_did_you_mean_for_misspelled_and_misplaced_keys():
    _, issues = _issues("  placement_grup: true\ninstance_type: x\n")
    hints = {i.path: i.hint for i in issues}
    assert "placement_group" in hints["nodes.placement_grup"]
    assert "nodes.instance_types" in hints["instance_type"]


def test_gp3_throughput_needs_iops():
    _, issues = _issues("storage:\n  dataset: {throughput: 1000}\n")
    assert "storage.dataset.throughput" in _paths(issues)
    spec, _ = _issues("storage:\n  dataset: {throughput: 1000, iops: 4000}\n")
    assert spec is not None


def test_ssh_open_to_world_warns():
    spec, issues = _issues("ssh: {allowed_cidr: 0.0.0.0/0}\n")
    assert spec is not None and "ssh.allowed_cidr" in _paths(issues, "warning")


@pytest.mark.parametrize(("cidr", "warned"), [
    ("203.0.113.7/32", False), ("10.20.0.0/16", False), ("10.20.0.0/15", True),
    ("10.0.0.0/8", True), ("2001:db8:1::/48", False), ("2001:db8::/47", True),
    ("::/0", True)])
def test_ssh_wider_than_one_site_warns(cidr, warned):
    """Wider than /16 (IPv4) or /48 (IPv6): a warning, never an error; one per spec."""
    spec, issues = _issues(f"ssh: {{allowed_cidr: '{cidr}'}}\n")
    assert spec is not None
    mine = [i for i in issues if i.path == "ssh.allowed_cidr"]
    assert [i.level for i in mine] == (["warning"] if warned else [])


def test_bytes_and_garbage_give_issues_not_exceptions():
    spec, issues = spec_api.checks(b"\x00\x01\x02\xff", "bin")
    assert spec is None and issues[0].file == "bin"


# --- the commands -------------------------------------------------------------------

def test_examples_validate_clean():
    assert len(EXAMPLES) >= 3
    result = CliRunner().invoke(cli, ["validate", *map(str, EXAMPLES)])
    assert result.exit_code == 0, result.output
    assert result.output.count("ok:") == len(EXAMPLES)
    for path in EXAMPLES:
        spec, issues = spec_api.check(str(path))
        assert spec is not None and not issues, [i.format() for i in issues]


def test_imagenet_example_is_the_tutorial_job():
    spec = spec_api.load(str(next(p for p in EXAMPLES if "imagenet" in p.name)))
    assert spec.nodes.count == 4 and spec.nodes.instance_types == ("p4d.24xlarge",)
    assert spec.nodes.market.startswith("spot") and spec.storage.scratch.raid0
    assert spec.storage.efs.create and spec.storage.dataset.snapshot.startswith("snap-")
    assert "--num-layers 152" in spec.train.command and "dist_sync" in spec.train.command
    assert spec.train.framework == "mxnet"


def test_validate_warning_exit_0_strict_exit_2(tmp_path):
    f = tmp_path / "w.yaml"
    f.write_text(BASE.format(types="g6.xlarge") + "train:\n  packages: [mxnet-cu112]\n")
    result = CliRunner().invoke(cli, ["validate", str(f)])
    assert result.exit_code == 0 and "warning: train.packages[0]" in result.output
    result = CliRunner().invoke(cli, ["validate", "--strict", str(f)])
    assert result.exit_code == 2 and "error: train.packages[0]" in result.output


def test_validate_json_lists_every_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\n")
    result = CliRunner().invoke(cli, ["validate", "--json", str(EXAMPLES[0]), str(bad)])
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert [f["ok"] for f in report["files"]] == [True, False]
    assert report["files"][1]["issues"][0]["path"] == "region"


def test_validate_nonexistent_file_is_exit_2():
    result = CliRunner().invoke(cli, ["validate", "/no/such/file.yaml"])
    assert result.exit_code == 2 and "cannot read" in result.output


def test_the_spec_page_documents_every_key_and_its_example_validates():
    from clusterkit.spec.keys import walk_keys

    page = (Path(__file__).parents[2] / "docs" / "reference" / "spec.md").read_text()
    section = page.split("<!-- section:spec -->")[1].split("<!-- /section:spec -->")[0]
    for path, _key in walk_keys():
        if path and not path.endswith(("[]", ".*")):
            assert f"| `{path}` |" in section, path
    example = section.split("```yaml\n")[1].split("```")[0]
    spec, issues = spec_api.checks(example, "docs/reference/spec.md")
    assert spec is not None, [i.format() for i in issues]


def test_installed_cli_exit_codes_without_traceback(tmp_path):
    import subprocess
    import sys

    ok = subprocess.run([sys.executable, "-m", "clusterkit", "validate", *map(str, EXAMPLES)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"name: x\nnodes:\n\tcount: 1\n")
    proc = subprocess.run([sys.executable, "-m", "clusterkit", "validate", str(bad)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"{bad}:3:1: error: tab character" in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
