"""training/nccl.py against the real captures (tests/data/node-captures: verbatim copies
of ../shared/data/node-captures/): the network each job's NCCL chose and why it is not on
EFA where it should be (all_reduce_perf's table: test_training_allreduce.py). Lines
written inline below are edge cases (empty, garbage, forms the README quotes from other
sources) and say so."""

from __future__ import annotations

import pytest

from clusterkit.training import nccl
from clusterkit.training.nccl import Cause, Net, Severity
from tests.node_captures import (
    CAPTURES,
    NO_PLUGIN,
    P4D_EKS,
    P4D_INIT_FAILED,
    P4D_OFI_140,
    P5EN,
    PERF_SOCKET,
    SAGEMAKER_FALLBACK,
    TCP_PROVIDER,
)

P4D_EFA = 4  # EFA interfaces of p4d.24xlarge
P5EN_EFA = 16  # of p5en.48xlarge
P5_EFA = 32  # of p5.48xlarge


def lines(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()


def transport(name: str) -> nccl.Transport:
    found = nccl.parse_transport(lines(name))
    assert found is not None, name
    return found


# -- the transport each capture shows ----------------------------------------------------

def test_p5en_chose_efa_on_16_nics():
    t = transport(P5EN)
    assert (t.kind, t.confirmed, t.provider, t.nics) == (Net.OFI, True, "efa", 16)
    assert t.evidence == "8h200-2:6831:6840 [0] NCCL INFO Using network Libfabric"
    assert t.provider_line.endswith("NET/OFI Selected Provider is efa (found 16 nics)")
    assert nccl.transport_problem(t, P5EN_EFA) is None


def test_p5en_log_on_a_32_nic_type_is_short_of_interfaces():
    finding = nccl.transport_problem(transport(P5EN), P5_EFA)
    assert finding.cause == Cause.FEWER_NICS and finding.severity == Severity.WARNING
    assert finding.summary == "only 16 of 32 EFA interfaces in use"
    assert "(found 16 nics)" in finding.evidence


def test_p4d_on_eks_chose_efa_with_gpudirect_rdma():
    t = transport(P4D_EKS)
    assert (t.kind, t.confirmed, t.provider, t.gdrdma) == (Net.OFI, True, "efa", True)
    assert t.nics is None  # this plugin does not print its NIC count
    # the capture's "Failed to find ncclCollNetPlugin_v4 symbol" is harmless, no failure
    assert t.no_plugin is None and t.plugin_failed is None
    assert t.evidence == ("nccl-tests-efa-16-worker-1:25:25 [0] NCCL INFO "
                          "Using network AWS Libfabric")  # mpirun's [1,8]<stdout>: gone
    assert t.interfaces == ()  # "Bootstrap : Using eth0…" is not the data network
    assert nccl.transport_problem(t, P4D_EFA) is None


def test_p4d_with_aws_ofi_nccl_1_4_0():
    t = transport(P4D_OFI_140)
    assert (t.kind, t.provider, t.plugin_version) == (Net.OFI, "efa", "1.4.0aws")
    assert nccl.transport_problem(t, P4D_EFA) is None


def test_no_plugin_found_means_sockets_with_that_cause():
    t = transport(NO_PLUGIN)
    # NCCL's own network line is not in the capture: the kind is inferred
    assert (t.kind, t.confirmed) == (Net.SOCKET, False)
    assert t.no_plugin == "[1] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so)."
    finding = nccl.transport_problem(t, P4D_EFA)
    assert finding.cause == Cause.NO_PLUGIN and finding.severity == Severity.CRITICAL
    assert finding.evidence == t.no_plugin
    assert "aws-ofi-nccl" in finding.fix and "LD_LIBRARY_PATH" in finding.fix


def test_tcp_provider_in_docker():
    t = transport(TCP_PROVIDER)
    assert (t.kind, t.confirmed, t.provider, t.nics) == (Net.OFI, False, "tcp", 1)
    assert (t.plugin_version, t.libfabric_version, t.nccl_version) == \
        ("1.12.1-aws", "1.22", "2.23.4+cuda12.4")
    finding = nccl.transport_problem(t, P4D_EFA)
    assert finding.cause == Cause.TCP_PROVIDER and finding.severity == Severity.CRITICAL
    assert finding.evidence.endswith("NET/OFI Selected Provider is tcp (found 1 nics)")
    assert "FI_PROVIDER=efa" in finding.fix and "/dev/infiniband" in finding.fix


def test_p4d_socket_fallback_because_gpudirect_is_off():
    t = transport(P4D_INIT_FAILED)
    assert (t.kind, t.confirmed, t.interfaces) == (Net.SOCKET, True, ("eth0",))
    # the CloudWatch columns ("  | 2025-05-16T… | ") are stripped from the evidence
    assert t.evidence == "ip-10-36-29-253:84:2553 [0] NCCL INFO NET/Socket : Using " \
                         "[0]eth0:10.36.29.253<0>"
    assert t.plugin_failed is not None and "initialization failed" in t.plugin_failed
    finding = nccl.transport_problem(t, P4D_EFA)
    assert finding.cause == Cause.NO_GPUDIRECT
    assert finding.evidence.endswith(
        "NCCL WARN NET/OFI GDR disabled on GDR-supported instance type p4d.24xlarge")
    assert "nvidia_peermem" in finding.fix


def test_sagemaker_socket_fallback_after_plugin_init_failed():
    t = transport(SAGEMAKER_FALLBACK)
    assert (t.kind, t.confirmed, t.interfaces) == (Net.SOCKET, True, ("eth0",))
    assert t.evidence.endswith("NCCL INFO NET/Socket : Using [0]eth0:10.0.227.37<0>")
    finding = nccl.transport_problem(t, P4D_EFA)
    assert finding.cause == Cause.PLUGIN_INIT_FAILED
    assert finding.evidence == ("algo-1:17774:17853 [1] nccl_net_ofi_create_plugin:259 "
                                "NCCL WARN NET/OFI aws-ofi-nccl initialization failed")
    assert "fi_info -p efa" in finding.fix


def test_socket_run_of_all_reduce_perf_has_no_reason_in_its_log():
    t = transport(PERF_SOCKET)
    assert (t.kind, t.confirmed) == (Net.SOCKET, True)
    finding = nccl.transport_problem(t, P4D_EFA)
    assert finding.cause == Cause.UNEXPLAINED_SOCKETS
    assert finding.evidence == "test-nccl-worker-0:22:22 [0] NCCL INFO Using network Socket"
    assert any("no aws-ofi-nccl plugin" in c for c in finding.also_possible)


@pytest.mark.parametrize("name", [P5EN, P4D_EKS, NO_PLUGIN, TCP_PROVIDER, P4D_INIT_FAILED])
def test_no_finding_where_efa_is_not_expected(name: str):
    assert nccl.transport_problem(transport(name), 0) is None


def test_every_finding_is_one_line():
    for name in (NO_PLUGIN, TCP_PROVIDER, P4D_INIT_FAILED, SAGEMAKER_FALLBACK, PERF_SOCKET):
        finding = nccl.transport_problem(transport(name), P4D_EFA)
        for text in (finding.summary, finding.evidence, finding.fix):
            assert text and "\n" not in text


# -- edge cases (inline lines) -----------------------------------------------------------

@pytest.mark.parametrize("text", [
    [], [""], ["garbage", "NCCL", "Using network"],
    # start-up lines that decide nothing yet (forms from the captures)
    ["host:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.70.144<0>",
     "host:1:1 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v4 symbol.",
     "host:1:1 [0] NCCL INFO NCCL version 2.9.9+cuda11.2"],
])
def test_nothing_decisive_is_none(text: list[str]):
    assert nccl.parse_transport(text) is None
    assert nccl.transport_problem(None, P4D_EFA) is None


def test_third_provider_form_prints_fabric_and_nics():
    # the form aws/aws-ofi-nccl#889 shows on p4d (quoted in the captures' README)
    t = nccl.parse_transport(
        ["h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)"])
    assert (t.kind, t.confirmed, t.provider, t.fabric, t.nics) == \
        (Net.OFI, False, "efa", "efa", 4)
    assert nccl.transport_problem(t, P4D_EFA) is None
    assert nccl.transport_problem(t, 8).summary == "only 4 of 8 EFA interfaces in use"


def test_sockets_on_one_rank_outrank_efa_on_the_others():
    text = lines(P4D_EKS) + lines(SAGEMAKER_FALLBACK)
    assert nccl.parse_transport(text).kind == Net.SOCKET


def test_nccl_version_line_without_info_prefix():
    t = nccl.parse_transport(["NCCL version 2.9.9+cuda11.2", *lines(P4D_EKS)])
    assert t.nccl_version == "2.9.9+cuda11.2"


def test_unreachable_peers_point_at_the_security_group():
    # aws/aws-ofi-nccl#663's message (a security group without the self rule)
    text = lines(P5EN) + ["8h200-3:1:2 [0] nccl_net_ofi_rdma:1 NCCL WARN NET/OFI Unable to "
                          "insert remote address into address vector for device 1."]
    finding = nccl.transport_problem(nccl.parse_transport(text), P5EN_EFA)
    assert finding.cause == Cause.SECURITY_GROUP
    assert "security group" in finding.fix and "address vector" in finding.evidence


def test_strip_prefix():
    assert nccl.strip_prefix("[1,8]<stdout>:host:1:1 [0] NCCL INFO x\n") == \
        "host:1:1 [0] NCCL INFO x"
    assert nccl.strip_prefix("  | 2024-11-28T07:42:11.528Z | algo-1:1:1 [7] NCCL INFO y") == \
        "algo-1:1:1 [7] NCCL INFO y"
    assert nccl.strip_prefix("plain") == "plain"
