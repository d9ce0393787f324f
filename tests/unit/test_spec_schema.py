"""`clusterkit schema` and the validator come from the same key tables and agree:
every example and many generated valid specs pass both; generated invalid values are
rejected by both. The tables' defaults are the model's defaults."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterkit import spec as spec_api
from clusterkit.cli.main import cli
from clusterkit.spec import keys, model
from clusterkit.spec.schema import json_schema
from clusterkit.spec.walk import Walk, walk_spec
from clusterkit.spec.yamlload import parse

EXAMPLES = sorted((Path(__file__).parents[2] / "examples").glob("*.yaml"))
VALIDATOR = jsonschema.Draft202012Validator(json_schema())


def _schema_ok(data) -> bool:
    return not any(True for _ in VALIDATOR.iter_errors(data))


def test_schema_command_prints_a_valid_draft_2020_12_schema():
    result = CliRunner().invoke(cli, ["schema"])
    assert result.exit_code == 0
    schema = json.loads(result.output)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")
    assert set(schema["required"]) == {"name", "region", "nodes"}
    assert schema["properties"]["nodes"]["properties"]["count"]["minimum"] == 1


def test_examples_pass_schema_and_validator():
    for path in EXAMPLES:
        root, issues = parse(path.read_text(), str(path))
        assert not issues and _schema_ok(root.plain()), path
        assert spec_api.load(str(path))


def test_table_defaults_are_the_model_defaults():
    sections = {"nodes": model.Nodes, "nodes.image": model.Image,
                "nodes.root_volume": model.RootVolume, "ssh": model.Ssh,
                "storage.scratch": model.Scratch, "storage.efs": model.Efs,
                "storage.dataset": model.Dataset, "train": model.Train}
    for path, cls in sections.items():
        table = dict(keys.walk_keys())[path].keys
        fields = {f.name: f for f in dataclasses.fields(cls)}
        assert set(table) == set(fields), path
        for name, key in table.items():
            f = fields[name]
            if key.type in ("object", "array", "map"):
                continue
            assert key.default == f.default, f"{path}.{name}"


# --- generated specs ------------------------------------------------------------------

_hex = st.text("0123456789abcdef", min_size=17, max_size=17)
_mount = st.sampled_from(["/scratch", "/efs", "/data", "/mnt/a", "/mnt/b", "/x/y"])
_optional = st.none() | st.just(None)
# Text a spec may hold: no control characters, line separators or format characters
# (bidi overrides); shell text (train.command) may add tabs and newlines.
_line = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Cf", "Zl", "Zp")))
_shell = st.text(st.characters(blacklist_categories=("Cc", "Cs", "Cf", "Zl", "Zp"),
                               whitelist_characters="\t\n"))
_key_name = st.from_regex(keys.KEY_NAME_RE, fullmatch=True)


def _section(**fields):
    """A mapping with any subset of the given fields."""
    return st.fixed_dictionaries({}, optional=fields)


VALID = st.fixed_dictionaries(
    {"name": st.from_regex(r"\A[a-z][a-z0-9-]{0,20}[a-z0-9]\Z"),
     "region": st.sampled_from(["us-east-1", "us-west-2", "eu-west-1"]),
     "nodes": st.fixed_dictionaries(
         {"instance_types": st.lists(st.sampled_from(
             ["p4d.24xlarge", "g5.xlarge", "g5.12xlarge", "p5.48xlarge", "i3.xlarge"]),
             min_size=1, max_size=3, unique=True)},
         optional={"count": st.integers(1, 64),
                   # capacity-block needs nodes.capacity_reservation: a meaning check
                   "market": st.sampled_from([m for m in model.MARKETS
                                              if m != "capacity-block"]),
                   "placement_group": st.booleans(),
                   "image": _section(id=_hex.map(lambda h: f"ami-{h}"), owner=st.just("self")),
                   "root_volume": _section(size_gb=st.integers(8, 16384),
                                           type=st.sampled_from(model.ROOT_VOLUME_TYPES))})},
    optional={
        "ssh": _section(user=st.just("ec2-user"), port=st.integers(1, 65535),
                        allowed_cidr=st.just("10.0.0.0/8"), key_name=_key_name),
        "storage": _section(efs=st.none() | _section(
            file_system_id=_hex.map(lambda h: f"fs-{h}"),
            deletion_policy=st.sampled_from(["retain"])),
            dataset=st.none() | _section(snapshot=_hex.map(lambda h: f"snap-{h}"),
                                         iops=st.integers(3000, 16000))),
        "train": _section(framework=st.sampled_from(model.FRAMEWORKS),
                          command=_shell.map(lambda t: t[:30]), env=st.dictionaries(
                              st.from_regex(r"\A[A-Z][A-Z0-9_]{0,8}\Z"),
                              _shell.map(lambda t: t[:10]) | st.integers(0, 99), max_size=3)),
        "tags": st.dictionaries(st.from_regex(r"\A[a-z]{1,10}\Z"), _line.map(lambda t: t[:20]),
                                max_size=3),
    })

_BREAKERS = [
    (("nodes", "count"), 0), (("nodes", "count"), "4"), (("nodes", "market"), "cheap"),
    (("ssh",), {"port": 65536}), (("region",), "Mars-1"), (("name",), "-bad"),
    (("nodes", "instance_types"), []), (("nodes", "instance_types"), "g5.xlarge"),
    (("nodes", "image"), {"id": "ami-1"}), (("storage",), {"dataset": {"snapshot": "snap"}}),
    (("nodes", "bogus"), 1), (("train",), {"servers_per_node": -1}),
    (("tags",), {"clusterkit:cluster": "x"}), (("nodes", "max_price"), 0),
    (("storage",), {"efs": {"mount": "relative"}}), (("nodes", "placement_group"), "yes"),
    (("ssh",), {"identity_file": '~/.ssh/id"\nMatch exec "touch /tmp/pwned'}),
    (("ssh",), {"identity_file": "~/.ssh/id\x00"}), (("ssh",), {"user": "root\tx"}),
    (("ssh",), {"key_name": "k'ey"}), (("train",), {"workdir": "/efs/$(id)"}),
    (("train",), {"python": "python3;id"}), (("train",), {"command": "run\x1b[2J"}),
    (("tags",), {"team": "a\nb"}), (("nodes", "image"), {"name": "ubuntu\u202e*"}),
]


def _validator_ok(data) -> bool:
    """The full validator (tables and meaning checks): no error at all."""
    spec, _ = spec_api.checks(yaml.safe_dump(data, sort_keys=False), "gen.yaml")
    return spec is not None


def _tables_ok(data) -> bool:
    """The table-driven part of the validator only (what the schema can express)."""
    root, issues = parse(yaml.safe_dump(data, sort_keys=False), "gen.yaml")
    w = Walk("gen.yaml", issues=list(issues))
    walk_spec(root, w)
    return not w.issues


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALID)
def test_generated_valid_specs_pass_both(data):
    assert _schema_ok(data)
    assert _validator_ok(data)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(VALID, st.sampled_from(_BREAKERS))
def test_generated_invalid_specs_fail_both(data, breaker):
    where, value = breaker
    target = data
    for part in where[:-1]:
        target = target.setdefault(part, {})
    target[where[-1]] = value
    assert not _schema_ok(data)
    assert not _tables_ok(data)
    assert not _validator_ok(data)


def test_every_own_pattern_refuses_what_the_one_line_rule_refuses():
    """The schema states a key's own pattern in place of the one-line rule, so each such
    pattern must refuse a control character anywhere, as the validator does."""
    checked = 0
    for path, key in keys.walk_keys():
        if key.type not in ("string", "text") or not key.pattern:
            continue
        assert key.example and re.fullmatch(key.pattern, key.example), path
        for char in ("\n", "\t", "\x00", "\r", "\x1b", "\x7f", "\x85", "\u2028", "\u202e"):
            for bad in (key.example + char, char + key.example,
                        key.example[:1] + char + key.example[1:]):
                assert not re.fullmatch(key.pattern, bad), (path, bad)
                # Python's $ (which python-jsonschema uses) also matches before a final
                # newline; ECMA-262's, which JSON Schema specifies, does not.
                if not bad.endswith("\n"):
                    assert not _schema_pattern_ok(key.pattern, bad), (path, bad)
        checked += 1
    assert checked >= 15


def _schema_pattern_ok(pattern: str, value: str) -> bool:
    """How the JSON Schema validator reads a pattern (re.search, not fullmatch)."""
    return re.search(pattern, value) is not None


def test_one_line_rule_in_the_schema():
    props = json_schema()["properties"]
    pattern = props["nodes"]["properties"]["image"]["properties"]["name"]["pattern"]
    assert pattern == keys.Chars.LINE.regex
    assert props["train"]["properties"]["command"]["pattern"] == keys.Chars.TEXT.regex
    assert re.search(keys.Chars.TEXT.regex, "a\n\tb") and not re.search(
        keys.Chars.TEXT.regex, "a\x1bb")
