"""bootstrap/efa.py: node output -> EFA facts -> the job environment, from the real
captures (tests/data/node-captures: verbatim copies of ../shared/data/node-captures/).
No capture of ``/proc/modules`` or of the NCCL library listing exists: those lines are
written inline below in the commands' own formats and say so, as do the other inline
edge cases."""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import pytest

from clusterkit.bootstrap import efa
from clusterkit.bootstrap.efa import EfaFacts

CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"

FI_P4D = "p4d.24xlarge.fi_info-efa-rdm.txt"
FI_P5 = "p5.48xlarge.fi_info-efa-rdm.mpirun.TRUNCATED.txt"
SMI_P4D = "unattributed/p4d.24xlarge-INFERRED.nvidia-smi.txt"
SMI_G5 = "g5-4gpu-SIZE-UNSTATED.nvidia-smi.txt"
SMI_P3 = "p3.16xlarge.nvidia-smi.txt"

# INLINE: /proc/modules lines in the kernel's format (name size refcount deps state addr)
MODULES_WITH_EFA = ["ena 172032 0 - Live 0xffffffffc0439000",
                    "efa 163840 0 - Live 0xffffffffc0a6a000",
                    "ib_uverbs 167936 1 efa, Live 0xffffffffc09d5000"]
MODULES_WITHOUT_EFA = ["ena 172032 0 - Live 0xffffffffc0439000",
                       "nvidia_uvm 1437696 0 - Live 0xffffffffc1a3e000"]


def lines(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()


# -- fi_info -----------------------------------------------------------------------------

def test_fi_info_p4d_lists_four_efa_devices():
    info = efa.parse_fi_info(lines(FI_P4D))
    assert info.present and info.error is None
    assert info.ranks == (None,)
    assert info.devices() == ("rdmap16s27", "rdmap32s27", "rdmap144s27", "rdmap160s27")
    assert info.devices_per_node == 4
    assert [e.fabric for e in info.efa][:2] == ["EFA-fe80::10d8:baff:fec9:6c1",
                                                "EFA-fe80::1011:66ff:feeb:c5af"]
    assert {(e.type, e.protocol) for e in info.efa} == {("FI_EP_RDM", "FI_PROTO_EFA")}
    assert (info.provider_version, info.libfabric_version) == ("111.20", "1.11.2")


def test_fi_info_p5_truncated_holds_one_device_of_each_of_two_nodes():
    # p5.48xlarge has 32 EFA devices, but the source cut the output to 2 of its 64
    # entries ("..."): one device per mpirun rank (node) is all this capture holds.
    info = efa.parse_fi_info(lines(FI_P5))
    assert info.ranks == (1, 0)
    assert info.devices(1) == ("rdmap79s0",) and info.devices(0) == ("rdmap201s0",)
    assert info.devices() == ()  # no unranked output in it
    assert info.devices_per_node == 1
    assert {e.fabric for e in info.efa} == {"efa"}  # the newer fabric name
    assert (info.provider_version, info.libfabric_version) == ("120.10", "1.20.1")
    assert info.error is None  # the two ssh warnings and "..." are skipped


@pytest.mark.parametrize("text", [
    [], [""], ["fi_getinfo: -61 (No data available)"],
    ["Warning: Permanently added 'x' (ED25519) to the list of known hosts.", "..."],
    ["garbage", "version: 1.2"],  # fields without a provider line are not an entry
])
def test_fi_info_without_efa(text: list[str]):
    info = efa.parse_fi_info(text)
    assert not info.present and info.devices_per_node == 0 and info.libfabric_version is None


def test_fi_info_error_line_is_kept():
    info = efa.parse_fi_info(["[1,0]<stdout>:fi_getinfo: -61 (No data available)"])
    assert info.error == "fi_getinfo: -61 (No data available)"


def test_fi_info_counts_devices_not_endpoint_types():
    # INLINE: `fi_info -p efa` without -t lists an -rdm and a -dgrm domain per device
    text = ["provider: efa", "    domain: rdmap16s27-rdm", "provider: efa",
            "    domain: rdmap16s27-dgrm", "provider: efa", "    domain: rdmap32s27-rdm"]
    assert efa.parse_fi_info(text).devices_per_node == 2


@pytest.mark.parametrize("version,release", [
    ("111.20", "1.11.2"), ("120.10", "1.20.1"), ("111.0", "1.11.0"), ("203.0", "2.3.0"),
    ("119.11", "1.19.1"), ("1.2", None), ("", None), (None, None), ("abc", None)])
def test_libfabric_release(version, release):
    assert efa.libfabric_release(version) == release


# -- module, driver, NCCL --------------------------------------------------------------

def test_efa_module():
    assert efa.parse_efa_module(MODULES_WITH_EFA)
    assert not efa.parse_efa_module(MODULES_WITHOUT_EFA)
    assert not efa.parse_efa_module([])
    assert efa.parse_efa_module(["Module Size Used by", "efa 163840 0"])  # lsmod's form
    assert not efa.parse_efa_module(["efa_nv_peermem 16384 0 - Live 0x0"])


@pytest.mark.parametrize("name,driver,cuda", [
    (SMI_P4D, "550.90.07", "12.4"), (SMI_G5, "535.54.03", "12.2"),
    (SMI_P3, "390.48", None),  # driver 390 prints no CUDA version
    ("a100-80gb.nvidia-smi-q.ecc-remapped-rows.TRUNCATED.txt", "510.73.08", "11.6"),  # -q
])
def test_driver_versions(name: str, driver: str, cuda: str | None):
    assert efa.parse_driver_versions(lines(name)) == efa.DriverVersions(driver, cuda)


def test_driver_versions_of_nothing():
    assert efa.parse_driver_versions(["garbage"]) == efa.DriverVersions(None, None)


def test_nccl_version_from_library_names():
    # INLINE: NCCL_LIB_COMMAND's output (ls -1 of the library globs)
    text = ["/usr/lib/x86_64-linux-gnu/libnccl.so.2", "/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.5",
            "/opt/nccl/build/lib/libnccl.so.2.9.9"]
    assert efa.parse_nccl_version(text) == "2.18.5"  # the newest, by number not by text
    assert efa.parse_nccl_version(["NCCL version 2.23.4+cuda12.4"]) == "2.23.4"
    assert efa.parse_nccl_version(["/usr/lib/libnccl.so.2", "garbage"]) is None
    assert efa.parse_nccl_version([]) is None


def test_version_tuple():
    assert efa.version_tuple("2.18.5+cuda12.2") == (2, 18, 5)
    assert efa.version_tuple("1.11.2") == (1, 11, 2)
    assert efa.version_tuple(None) == () and efa.version_tuple("x") == ()


# -- facts -> environment ----------------------------------------------------------------

def p4d_facts(**changes) -> EfaFacts:
    facts = EfaFacts.from_outputs(lines(FI_P4D), MODULES_WITH_EFA, lines(SMI_P4D),
                                  changes.pop("nccl_libs", None))
    return dataclasses.replace(facts, **changes)


def test_facts_of_a_p4d():
    assert p4d_facts() == EfaFacts(efa_devices=4, provider=True, module_loaded=True,
                                   libfabric_version="1.11.2", cuda_version="12.4",
                                   driver_version="550.90.07", nccl_version=None)


def test_facts_when_every_command_failed():
    assert EfaFacts.from_outputs(None, None, None, None) == EfaFacts(0, False, False)


def test_p4d_environment():
    env = efa.efa_environment(p4d_facts(), "p4d.24xlarge", "ampere", expected_efa=4)
    assert env.env == {"FI_PROVIDER": "efa", "FI_EFA_FORK_SAFE": "1",
                       "FI_EFA_USE_DEVICE_RDMA": "1"}
    # libfabric 1.11.2 (this capture) predates the stacks AWS's presets start from
    assert len(env.warnings) == 1 and "older than 1.18" in env.warnings[0]


def test_p5_truncated_output_shows_one_of_32_devices():
    facts = EfaFacts.from_outputs(lines(FI_P5), MODULES_WITH_EFA)
    assert (facts.efa_devices, facts.libfabric_version) == (1, "1.20.1")
    env = efa.efa_environment(facts, "p5.48xlarge", "hopper", expected_efa=32)
    assert env.env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env.warnings == ["only 1 of the 32 EFA interfaces p5.48xlarge supports are visible "
                            "on this node: launch with an EFA interface on every network card"]


@pytest.mark.parametrize("itype,arch", [
    ("p3dn.24xlarge", "volta"), ("g5.48xlarge", "ampere"), ("g6.48xlarge", "ada"),
    ("p5.4xlarge", "hopper"),  # aws-ofi-nccl does not require GPUDirect there
    ("p4d.24xlarge", None), ("c5n.18xlarge", None)])
def test_no_device_rdma_without_gpudirect(itype: str, arch: str | None):
    env = efa.efa_environment(p4d_facts(), itype, arch)
    assert "FI_EFA_USE_DEVICE_RDMA" not in env.env
    assert env.env["FI_PROVIDER"] == "efa"


@pytest.mark.parametrize("itype", ["p4de.24xlarge", "p5e.48xlarge", "p5en.48xlarge"])
def test_device_rdma_on_every_gdr_type(itype: str):
    arch = "ampere" if itype.startswith("p4") else "hopper"
    assert efa.efa_environment(p4d_facts(), itype, arch).env["FI_EFA_USE_DEVICE_RDMA"] == "1"


def test_no_efa_software_means_no_settings_and_a_warning():
    facts = EfaFacts.from_outputs(["fi_getinfo: -61 (No data available)"], MODULES_WITHOUT_EFA,
                                  lines(SMI_P4D))
    env = efa.efa_environment(facts, "p4d.24xlarge", "ampere", expected_efa=4)
    assert env.env == {}
    (warning,) = env.warnings
    assert "p4d.24xlarge supports EFA" in warning and "TCP sockets" in warning
    assert "no efa kernel module" in warning and "fi_info -p efa" in warning
    assert "AWS Deep Learning AMI" in warning and "EFA installer" in warning


def test_module_without_provider_names_both_likely_causes():
    facts = EfaFacts.from_outputs([], MODULES_WITH_EFA)
    (warning,) = efa.efa_environment(facts, "p5.48xlarge", "hopper", 32).warnings
    assert "module is loaded" in warning and "no EFA interface attached" in warning


def test_type_without_efa_gets_nothing():
    facts = EfaFacts.from_outputs([], MODULES_WITHOUT_EFA)
    assert efa.efa_environment(facts, "g5.xlarge", "ampere", expected_efa=0) == efa.EfaEnv()


def test_sync_memops_only_for_libfabric_1_16_to_1_19_0_with_nccl_2_19():
    nccl_219 = ["/usr/lib/x86_64-linux-gnu/libnccl.so.2.19.3"]  # INLINE
    nccl_218 = ["/usr/lib/x86_64-linux-gnu/libnccl.so.2.18.5"]  # INLINE
    in_window = p4d_facts(libfabric_version="1.18.1", nccl_libs=nccl_219)
    assert efa.efa_environment(in_window, "p4d.24xlarge", "ampere").env[
        "FI_EFA_SET_CUDA_SYNC_MEMOPS"] == "0"
    for facts in (p4d_facts(libfabric_version="1.18.1", nccl_libs=nccl_218),
                  p4d_facts(libfabric_version="1.19.1", nccl_libs=nccl_219),
                  p4d_facts(libfabric_version="1.11.2", nccl_libs=nccl_219)):
        assert "FI_EFA_SET_CUDA_SYNC_MEMOPS" not in \
            efa.efa_environment(facts, "p4d.24xlarge", "ampere").env
    unknown = efa.efa_environment(p4d_facts(libfabric_version="1.18.1"), "p4d.24xlarge",
                                  "ampere")
    assert "FI_EFA_SET_CUDA_SYNC_MEMOPS" not in unknown.env
    assert any("FI_EFA_SET_CUDA_SYNC_MEMOPS=0" in w for w in unknown.warnings)


def test_p5_version_warnings():
    facts = p4d_facts(libfabric_version="1.20.1", cuda_version="11.8",
                      nccl_libs=["/usr/lib64/libnccl.so.2.17.1"])  # INLINE
    warnings = efa.efa_environment(facts, "p5.48xlarge", "hopper", 32).warnings
    assert any("CUDA 11.8" in w for w in warnings) and any("NCCL 2.17.1" in w for w in warnings)
    assert not any("CUDA" in w for w in efa.efa_environment(
        facts, "p4d.24xlarge", "ampere", 4).warnings)  # P5's minimums only on P5


# -- the profile -----------------------------------------------------------------------------

def test_profile_text_exports_each_setting_quoted():
    text = efa.profile_text({"FI_PROVIDER": "efa", "A_B": "x y'z", "FI_EFA_FORK_SAFE": "1"})
    body = text.splitlines()
    assert body[0].startswith("# Written by clusterkit")
    assert body[1:] == ["export A_B='x y'\"'\"'z'", "export FI_EFA_FORK_SAFE=1",
                        "export FI_PROVIDER=efa"]
    assert text.endswith("\n")
    assert shlex.split(body[1].split("=", 1)[1]) == ["x y'z"]


def test_profile_text_of_the_p4d_environment():
    env = efa.efa_environment(p4d_facts(), "p4d.24xlarge", "ampere", 4).env
    assert efa.profile_text(env).splitlines()[1:] == [
        "export FI_EFA_FORK_SAFE=1", "export FI_EFA_USE_DEVICE_RDMA=1", "export FI_PROVIDER=efa"]


def test_profile_text_refuses_bad_names():
    with pytest.raises(ValueError, match="not shell variable names"):
        efa.profile_text({"BAD NAME; rm -rf /": "1"})
    assert efa.profile_text({}).count("\n") == 1  # the header only
