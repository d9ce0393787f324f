"""Issue 36 item 4: `clusterkit plan` takes several spec files, as `validate` does: each
plan under its file's name (`--json`: one document listing them), the first that fails
stops the command; `--out` saves one plan, so with several specs it is a usage error."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from clusterkit.cli.main import cli

EXAMPLES = sorted(str(p) for p in (Path(__file__).parents[2] / "examples").glob("*.yaml"))


def test_plan_offline_takes_every_example_each_under_its_name():
    result = CliRunner().invoke(cli, ["plan", "--offline", *EXAMPLES])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    heads = [lines.index(f) for f in EXAMPLES]
    assert heads == sorted(heads) and len(EXAMPLES) >= 3
    for head in heads:  # the plan's first line right under its file's name
        assert lines[head + 1].startswith("cluster ") and "up will" in lines[head + 1]


def test_plan_json_of_several_specs_is_one_document_listing_them():
    result = CliRunner().invoke(cli, ["plan", "--offline", "--json", *EXAMPLES])
    assert result.exit_code == 0, result.output
    plans = json.loads(result.stdout)["plans"]
    assert [p["file"] for p in plans] == EXAMPLES
    assert all(p["plan"]["changes"] for p in plans)
    one = json.loads(CliRunner().invoke(cli, ["plan", "--offline", "--json",
                                              EXAMPLES[0]]).stdout)
    assert one == plans[0]["plan"]  # one spec: the plan itself, as before


def test_one_spec_prints_no_heading():
    result = CliRunner().invoke(cli, ["plan", "--offline", EXAMPLES[0]])
    assert result.exit_code == 0 and EXAMPLES[0] not in result.output.splitlines()


def test_out_with_several_specs_is_a_usage_error(tmp_path):
    out = tmp_path / "plan.json"
    result = CliRunner().invoke(cli, ["plan", *EXAMPLES[:2], "--out", str(out)])
    assert result.exit_code == 2
    assert "--out saves one plan: 2 specs given" in result.stderr
    assert not out.exists()


def test_the_first_spec_that_fails_stops_the_command(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nregion: us-east-1\nnodes: {count: 0, "
                   "instance_types: [c5.large]}\n")
    result = CliRunner().invoke(cli, ["plan", "--offline", EXAMPLES[0], str(bad)])
    assert result.exit_code == 2
    assert EXAMPLES[0] in result.output.splitlines() and f"{bad}:3" in result.stderr
