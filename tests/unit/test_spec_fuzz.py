"""Property: nothing a user can put in a spec file gives a traceback, only a Spec or
located issues (SpecError from load/loads)."""

from __future__ import annotations

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterkit import spec as spec_api
from clusterkit.errors import SpecError

FAST = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
_YAMLISH = st.sampled_from(list("abc:-[]{}#&*!|>'\"%@`,? \n\t\x00\xff.0123~=") +
                           ["name:", "nodes:", "  count: ", "instance_types:", "- ", "&a ",
                            "*a", "!!int ", "!!binary ", "---\n", "...\n", "<<: ", "\n  ",
                            "p4d.24xlarge", "2024-01-01", "yes", ".nan", "0x1f", "1e400"])
_KEYS = st.sampled_from(["name", "region", "nodes", "count", "instance_types", "storage",
                         "scratch", "efs", "dataset", "train", "env", "packages", "tags",
                         "ssh", "port", "image", "id", "x"])
_SCALARS = (st.none() | st.booleans() | st.integers() | st.floats() |
            st.text(max_size=20) | st.dates())
_TREES = st.recursive(_SCALARS, lambda kids: st.lists(kids, max_size=4) |
                      st.dictionaries(_KEYS | st.text(max_size=5), kids, max_size=5),
                      max_leaves=25)


def _no_traceback(data) -> None:
    spec, issues = spec_api.checks(data, "fuzz.yaml")
    assert spec is not None or any(i.level == "error" for i in issues)
    for issue in issues:
        assert issue.file == "fuzz.yaml" and issue.line >= 1 and issue.col >= 1
        assert issue.message
    try:
        spec_api.loads(data, "fuzz.yaml")
    except SpecError as err:
        assert err.exit_code == 2 and err.issues


@FAST
@given(st.text(max_size=200))
def test_random_text(text):
    _no_traceback(text)


@FAST
@given(st.binary(max_size=200))
def test_random_bytes(data):
    _no_traceback(data)


@FAST
@given(st.lists(_YAMLISH, max_size=40).map("".join))
def test_random_yaml_like_text(text):
    _no_traceback(text)


@FAST
@given(st.dictionaries(_KEYS, _TREES, max_size=6))
def test_random_nested_structures(tree):
    _no_traceback(yaml.safe_dump(tree))


@FAST
@given(st.fixed_dictionaries({"name": st.just("f"), "region": st.just("us-east-1"),
                              "nodes": st.dictionaries(_KEYS, _TREES, max_size=4)},
                             optional={"storage": _TREES, "train": _TREES, "ssh": _TREES}))
def test_random_values_under_known_sections(tree):
    _no_traceback(yaml.safe_dump(tree))
