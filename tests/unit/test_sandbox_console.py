"""The sandbox's console output: cloud-init's host-key block made from a node's real key
(what clusterkit's parser reads, with the fingerprint ssh-keygen computes), and the lie or
silence a test can ask for, by instance id or CLUSTER/INDEX, written to the state dir."""

from __future__ import annotations

import subprocess

from clusterkit.cluster.access import console_keys
from clusterkit_sandbox import console
from tests import support


def _lookup(key: str):
    nodes = {"i-1": (key, "ip-10-0-0-5", "c1", 1)}
    return nodes.get


def test_console_shows_the_node_s_real_key(tmp_path):
    path = support.ssh_keygen(tmp_path / "host")
    key = support.public_key(path)
    text = console.console_text(key + " root@x", "ip-10-0-0-5")
    parsed = console_keys.parse(text)
    assert [fp.value for fp in parsed.fingerprints] == [support.fingerprint(path)]
    assert parsed.keys == (key,) and parsed.finished
    assert console_keys.verify(key, parsed) is console_keys.Verdict.MATCH


def test_lie_or_silence_by_instance_id_or_cluster_index(tmp_path):
    key = support.public_key(support.ssh_keygen(tmp_path / "host"))
    lookup = _lookup(key)

    def verdict() -> console_keys.Verdict:
        text = console.output_for(tmp_path, "i-1", lookup)
        assert text is not None
        return console_keys.verify(key, console_keys.parse(text))

    assert verdict() is console_keys.Verdict.MATCH
    assert console.output_for(tmp_path, "i-2", lookup) is None  # no node: moto's sample
    for selector in ("i-1", "c1/1"):
        console.set_mode(tmp_path, selector, console.ConsoleMode.LIE)
        assert verdict() is console_keys.Verdict.MISMATCH
        lying = console_keys.parse(console.output_for(tmp_path, "i-1", lookup) or "")
        assert lying.keys == (console.other_key("i-1"),)
        console.set_mode(tmp_path, selector, console.ConsoleMode.SILENT)
        assert verdict() is console_keys.Verdict.UNPRINTED
        quiet = console_keys.parse(console.output_for(tmp_path, "i-1", lookup) or "")
        assert quiet.finished and not quiet.printed  # the image prints none
        console.set_mode(tmp_path, selector, None)
        assert verdict() is console_keys.Verdict.MATCH
    assert console.modes(tmp_path) == {}
    console.set_mode(tmp_path, "c1/0", console.ConsoleMode.LIE)  # another node: honest here
    assert verdict() is console_keys.Verdict.MATCH
    assert console.modes(tmp_path) == {"c1/0": console.ConsoleMode.LIE}


def test_the_lie_is_a_key_ssh_keygen_reads(tmp_path):
    other = console.other_key("i-1")
    (tmp_path / "k.pub").write_text(other + " lie\n")
    out = subprocess.run(["ssh-keygen", "-lf", str(tmp_path / "k.pub")], capture_output=True,
                         text=True, check=True).stdout.split()
    assert out[1] == console.fingerprint(other) and out[-1] == "(ED25519)"
    assert other != console.other_key("i-2")
