"""Pure parts of the sandbox: state dir, addresses, names, boot script, client env."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from clusterkit import sandboxmode
from clusterkit.errors import SandboxError
from clusterkit_sandbox import node
from clusterkit_sandbox.agent import address_for
from clusterkit_sandbox.disks import ebs_link_name, store_link_name
from clusterkit_sandbox.server import capabilities
from clusterkit_sandbox.state import pid_alive, read_json, state_dir, write_json


def test_state_dir_precedence(monkeypatch, tmp_path):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert state_dir() == tmp_path / ".clusterkit" / "sandbox"
    monkeypatch.setenv("CLUSTERKIT_SANDBOX_DIR", str(tmp_path / "env"))
    assert state_dir() == tmp_path / "env"
    assert state_dir(tmp_path / "flag") == tmp_path / "flag"


def test_json_roundtrip_and_missing(tmp_path):
    write_json(tmp_path / "a.json", {"x": 1})
    assert read_json(tmp_path / "a.json") == {"x": 1}
    assert read_json(tmp_path / "missing.json", {}) == {}
    assert list(tmp_path.glob(".*tmp")) == []


def test_pid_alive():
    import os

    assert pid_alive(os.getpid())
    assert not pid_alive(None)
    assert not pid_alive(2 ** 22 + 7)


@pytest.mark.parametrize("index,address", [(2, "127.0.0.2"), (254, "127.0.0.254"),
                                           (255, "127.0.1.2"), (508, "127.0.2.2")])
def test_address_for(index, address):
    assert address_for(index) == address


def test_address_blocks_keep_sandboxes_apart():
    assert address_for(2, 3) == "127.3.0.2"
    assert {address_for(i, 0) for i in range(2, 600)}.isdisjoint(
        {address_for(i, 1) for i in range(2, 600)})


def test_claim_block_is_exclusive():
    from clusterkit_sandbox.server import claim_block

    first, sock1 = claim_block()
    second, sock2 = claim_block()
    try:
        assert first != second
    finally:
        sock1.close()
        sock2.close()


def test_addresses_are_unique_over_a_long_run():
    assert len({address_for(i) for i in range(2, 3000)}) == 2998


def test_device_names_match_nitro():
    assert ebs_link_name("vol-0abc123") == "nvme-Amazon_Elastic_Block_Store_vol0abc123"
    assert store_link_name("i-0ab", 1).startswith("nvme-Amazon_EC2_NVMe_Instance_Storage_")


def test_boot_script_isolates_the_node(tmp_path):
    spec = node.NodeSpec("i-1", "127.0.0.9", "ip-10-0-0-9", ["ssh-rsa AAA"], tmp_path / "n",
                         tmp_path / "efs")
    script = node.boot_script(spec)
    assert "hostname ip-10-0-0-9" in script
    assert "lowerdir=/usr," in script and "lowerdir=/," not in script and "chroot" in script
    assert "mount -t proc " in script and "--rbind /proc" not in script  # its own /proc
    assert script.strip().splitlines()[-1].startswith("exec chroot")
    assert " ".join(node.sshd_flags()) in script


def test_sshd_skips_the_per_connection_re_exec_only_where_it_can(monkeypatch):
    node.sshd_flags.cache_clear()
    answers = iter(["unknown option -- r\nusage: sshd ...", "Missing privsep directory"])
    monkeypatch.setattr(node.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(
        a[0], 255, "", next(answers)))
    try:
        assert node.sshd_flags() == (node.SSHD, "-D", "-e")  # a newer sshd: no -r
        node.sshd_flags.cache_clear()
        assert node.sshd_flags() == (node.SSHD, "-D", "-e", "-r")
    finally:
        node.sshd_flags.cache_clear()


def test_sshd_config_listens_only_on_its_address():
    text = node.SSHD_CONFIG.format(address="127.0.0.7")
    assert "ListenAddress 127.0.0.7:22" in text
    assert "PasswordAuthentication no" in text


def test_capabilities_say_what_is_not_emulated():
    caps = capabilities()
    assert {"root", "ssh_nodes", "loop_devices", "md_raid", "not_emulated"} <= set(caps)
    if not Path("/proc/mdstat").exists():
        assert any("md RAID" in n and "not emulated" in n for n in caps["not_emulated"])


def test_client_env_needs_a_running_sandbox(tmp_path):
    with pytest.raises(SandboxError) as info:
        sandboxmode.sandbox_env(str(tmp_path))
    assert "clusterkit sandbox start" in (info.value.hint or "")


def test_client_packages_are_shown_on_nodes_only_where_no_shown_tree_has_them(monkeypatch):
    """A checkout anywhere outside the trees a node shows (/usr, /etc, ...) has its
    site-packages bound read-only at the same path on every node; under /usr the overlay
    shows them already."""
    import sysconfig

    for checkout in ("/tmp/ck ci", "/work/x"):
        site = f"{checkout}/.venv/lib/python3.11/site-packages"
        monkeypatch.setattr(sysconfig, "get_paths", lambda site=site: {"purelib": site})
        (line,) = node.client_packages_mount("/n/merged")
        quoted = shlex.quote(site)
        assert line == (f"mkdir -p /n/merged{quoted} && "
                        f"mount --bind -o ro {quoted} /n/merged{quoted}")
    monkeypatch.setattr(sysconfig, "get_paths",
                        lambda: {"purelib": "/usr/lib/python3/dist-packages"})
    assert node.client_packages_mount("/n/merged") == []
