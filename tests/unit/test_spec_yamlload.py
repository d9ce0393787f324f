"""The located YAML loader: locations, and every kind of malformed YAML refused with a
located issue (never an exception)."""

from __future__ import annotations

import pytest

from clusterkit.spec.yamlload import MAX_BYTES, decode, parse, read_spec_file


def test_locations_are_one_based_for_keys_values_and_items():
    root, issues = parse("name: x\nnodes:\n  instance_types:\n    - a\n    - b\n", "f.yaml")
    assert not issues and root is not None
    nodes = root.value["nodes"]
    assert (nodes.key_loc.line, nodes.key_loc.col) == (2, 1)
    types = nodes.value["instance_types"]
    assert (types.key_loc.line, types.key_loc.col) == (3, 3)
    second = types.value[1]
    assert (second.loc.file, second.loc.line, second.loc.col) == ("f.yaml", 5, 7)
    assert root.value["name"].loc.col == 7
    assert root.plain() == {"name": "x", "nodes": {"instance_types": ["a", "b"]}}


def test_keys_stay_as_written_not_yaml11_booleans():
    root, _ = parse("on: 1\nyes: no\n", "f")
    assert root.plain() == {"on": 1, "yes": False}


@pytest.mark.parametrize("text,line,col,words", [
    ("a: 1\n\tb: 2\n", 2, 1, "tab"),
    ("a: 1\na: 2\n", 2, 1, "duplicate key 'a'"),
    ("- a\n", 1, 1, "must be a mapping"),
    ("", 1, 1, "empty"),
    ("# only a comment\n", 1, 1, "empty"),
    ("a: [1, 2\n", 2, 1, "invalid YAML"),
    ("a: &x [1]\nb: *x\n", 2, 4, "alias *x"),
    ("a: !custom 3\n", 1, 4, "custom tag"),
    ("a: !!int abc\n", 1, 4, "not a valid int"),
    ("a: x\x01y\n", 1, 5, "control or binary"),
    ("a: " + "[" * 100 + "]" * 100 + "\n", 1, 35, "nesting"),
    ("a: 1\n---\nb: 2\n", 2, 1, "another document"),
])
def test_malformed_yaml_is_located(text, line, col, words):
    root, issues = parse(text, "f.yaml")
    assert root is None or issues
    assert issues, text
    first = issues[0]
    assert (first.file, first.line, first.col) == ("f.yaml", line, col)
    assert words in first.message
    assert first.hint


def test_bytes_not_utf8_are_located():
    text, issues = decode(b"a: 1\nb: caf\xe9\n", "f")
    assert text is None
    assert (issues[0].line, issues[0].col) == (2, 7)
    assert "not UTF-8" in issues[0].message


def test_utf8_bom_is_accepted():
    text, issues = decode("\ufeffa: 1\n".encode(), "f")
    assert text == "a: 1\n" and not issues


def test_huge_file_is_refused_without_reading_it_all(tmp_path):
    big = tmp_path / "big.yaml"
    big.write_bytes(b"a: 1\n" + b"#" * (MAX_BYTES + 10))
    text, issues = read_spec_file(str(big))
    assert text is None and "larger than 1024 KiB" in issues[0].message
    text, issues = read_spec_file("/dev/zero")  # endless: the read is capped
    assert text is None and issues


def test_billion_laughs_is_refused_fast():
    lines = ['a0: &a0 ["x"]'] + [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]"
                                 for i in range(1, 12)]
    root, issues = parse("\n".join(lines) + "\n", "bomb")
    assert root is None and "alias" in issues[0].message


def test_missing_file_is_an_issue_not_an_exception(tmp_path):
    text, issues = read_spec_file(str(tmp_path / "nope.yaml"))
    assert text is None and "cannot read" in issues[0].message
