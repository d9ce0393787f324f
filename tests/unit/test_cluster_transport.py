"""cluster/jobs/transport.py: the job's own NCCL transport, read from its log lines as
`train` follows it. The real captures (tests/data/node-captures, NCCL_DEBUG=INFO lines of
jobs on p4d, p5en and SageMaker) are fed through the watcher as one node's log lines,
line by line as the follower streams them; out come the lines `train` prints and whether
the job is stopped. Lines written inline are edge cases and say so.

The sandbox has no EFA and its jobs print no NCCL line: it cannot run this check end to
end (its types have no EFA interface, so `train` makes no watcher there; see
test_no_watcher_without_efa), hence these tests feed real captures instead."""

from __future__ import annotations

import dataclasses
import io
import json
import tarfile
import threading
from types import SimpleNamespace

import pytest

from clusterkit.cluster.jobs import attempt, transport
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.jobs.attempt import follow_job
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.jobs.results import NodeStop, StopResult
from clusterkit.cluster.jobs.transport import MAX_LINES, TransportWatch
from clusterkit.kinds import Market
from clusterkit.node.jobstate import JobStateName
from clusterkit.plan.nodes import Node
from clusterkit.remote.connect import Hop, Login, Target
from clusterkit.spec import loads
from clusterkit.training import jobfiles
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

JOB = "j-20250101-120000-ab12"


def lines(name: str) -> list[str]:
    return (CAPTURES / name).read_text().splitlines()


def cluster(type_name: str = "p4d.24xlarge", efa: str = "auto", count: int = 2) -> JobCluster:
    spec = loads(f"name: c1\nregion: us-east-1\nnodes: {{count: {count}, instance_types: "
                 f"[{type_name}]}}\nnetwork: {{efa: '{efa}'}}\n"
                 "train: {framework: torchrun, command: python3 train.py}\n")
    nodes = [Node(f"i-{i}", i, "running", type_name, "us-east-1a", Market.ON_DEMAND,
                  "us-east-1") for i in range(count)]
    return JobCluster("c1", spec, Login("c1"), nodes, [])


def watch(type_name: str = "p4d.24xlarge", efa: str = "auto",
          count: int = 2) -> tuple[TransportWatch, io.StringIO]:
    out = io.StringIO()
    found = transport.watch_for(cluster(type_name, efa, count), out)
    assert found is not None
    return found, out


def said(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def feed(w: TransportWatch, node: str, text: list[str]) -> None:
    for line in text:
        w.add(node, line)


def p5en_hosts(w: TransportWatch) -> None:
    """The p5en capture holds two hosts' lines: each is one node here."""
    text = lines(P5EN)
    feed(w, "master", [line for line in text if line.startswith("8h200-2:")])
    feed(w, "worker-1", [line for line in text if line.startswith("8h200-3:")])


# -- who is watched ------------------------------------------------------------------

def test_no_watcher_without_efa():
    # the sandbox's types (c5.large), a GPU type without EFA, and EFA turned off
    for type_name, efa in (("c5.large", "auto"), ("p3.16xlarge", "auto"),
                           ("p4d.24xlarge", "false")):
        assert transport.watch_for(cluster(type_name, efa), io.StringIO()) is None
    assert transport.expected_efa(cluster().spec, "no.such-type") == 0


@pytest.mark.parametrize(("type_name", "efa", "expected", "required"), [
    ("p4d.24xlarge", "auto", 4, False), ("p4d.24xlarge", "true", 4, True),
    ("p5.48xlarge", "auto", 32, False), ("p5en.48xlarge", "true", 16, True)])
def test_the_watcher_expects_the_types_efa_interfaces(type_name, efa, expected, required):
    w, _ = watch(type_name, efa)
    assert (w.expected_efa, w.required, w.nodes) == (expected, required,
                                                     ("master", "worker-1"))


# -- EFA in use: one info line ---------------------------------------------------------

def test_p4d_with_aws_ofi_nccl_1_4_0_on_both_nodes_is_one_line():
    w, out = watch("p4d.24xlarge", "true")
    feed(w, "master", lines(P4D_OFI_140))
    assert said(out) == []  # one node decided: nothing said yet
    feed(w, "worker-1", lines(P4D_OFI_140))
    assert said(out) == ["[transport] NET/OFI efa on every node (this aws-ofi-nccl does "
                         "not print how many NICs it uses)"]
    assert not w.stop.is_set() and w.finish() == ()


def test_four_nics_on_every_p4d_node():
    # the provider line in the form aws/aws-ofi-nccl#889 shows on p4d (quoted in the
    # captures' README), then NCCL's network line as the p4d captures print it: inline
    text = ["h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa (found 4 nics)",
            "h:1:1 [0] NCCL INFO Using network AWS Libfabric"]
    w, out = watch("p4d.24xlarge")
    feed(w, "master", text)
    feed(w, "worker-1", text)
    assert said(out) == ["[transport] NET/OFI efa, 4 NICs on every node"]


def test_p4d_on_eks_through_mpiruns_prefix():
    w, out = watch("p4d.24xlarge", count=1)
    feed(w, "master", lines(P4D_EKS))
    assert said(out)[0].startswith("[transport] NET/OFI efa on every node")


def test_p5en_16_nics_on_its_16_interfaces():
    w, out = watch("p5en.48xlarge", "true")
    p5en_hosts(w)
    assert said(out) == []  # worker-1's log is cut before NCCL's network line
    assert w.finish() == ()
    assert said(out) == ["[transport] NET/OFI efa, 16 NICs on every node"]


# -- not on EFA: said at once, once; stopped under network.efa: true --------------------

@pytest.mark.parametrize(("capture", "cause", "transport_name"), [
    (SAGEMAKER_FALLBACK, "plugin_init_failed", "NET/Socket (eth0)"),
    (P4D_INIT_FAILED, "no_gpudirect", "NET/Socket (eth0)"),
    (PERF_SOCKET, "unexplained_sockets", "NET/Socket"),
])
def test_sockets_where_efa_is_required_stop_the_job(capture, cause, transport_name):
    w, out = watch("p4d.24xlarge", "true")
    feed(w, "worker-1", lines(capture))
    assert w.stop.is_set()
    first, stopping = said(out)
    assert first.startswith("[transport] critical: node worker-1: NCCL runs over TCP "
                            "sockets, not EFA: ") and "; fix: " in first
    assert stopping.startswith("[transport] stopping the job: network.efa is true and "
                               f"NCCL on worker-1 chose {transport_name}, not EFA: ")
    assert w.stop_reason is not None and transport_name in w.stop_reason
    (finding,) = w.findings()
    assert (finding["kind"], finding["cause"], finding["severity"], finding["nodes"]) == \
        ("transport", cause, "critical", ["worker-1"])


def test_sockets_under_efa_auto_are_said_not_stopped_and_said_once():
    w, out = watch("p4d.24xlarge", "auto")
    feed(w, "master", lines(SAGEMAKER_FALLBACK))
    feed(w, "worker-1", lines(SAGEMAKER_FALLBACK))
    assert not w.stop.is_set() and w.stop_reason is None
    (line,) = said(out)
    assert line.startswith("[transport] critical: node master: NCCL runs over TCP sockets, "
                           "not EFA: the aws-ofi-nccl plugin failed to initialise (NCCL: ")
    assert "fix: the plugin loaded but found no usable EFA device" in line
    assert w.finish()[0]["nodes"] == ["master", "worker-1"]  # both, said once


def test_no_plugin_waits_for_nccls_own_network_line():
    # "No plugin found" alone does not stop a job (a plugin of another name may still
    # load): NCCL's "Using network Socket" decides; the capture ends before it
    w, out = watch("p4d.24xlarge", "true")
    feed(w, "worker-1", lines(NO_PLUGIN))
    assert said(out) == [] and not w.stop.is_set()
    w.add("worker-1", "[1] NCCL INFO Using network Socket")  # NCCL's form (inline)
    assert w.stop.is_set()
    assert "no aws-ofi-nccl plugin on the image" in said(out)[0]


def test_the_tcp_provider_capture_is_said_when_the_job_ends():
    w, out = watch("p4d.24xlarge", "true")
    feed(w, "master", lines(TCP_PROVIDER))
    assert said(out) == []  # NCCL's network line is cut from the capture
    (finding,) = w.finish()
    assert finding["cause"] == "tcp_provider" and finding["transport"] == "NET/OFI tcp"
    assert not w.stop.is_set()  # the job is over: nothing to stop
    assert said(out)[0].startswith("[transport] critical: node master: the aws-ofi-nccl "
                                   "plugin runs on libfabric's 'tcp' provider")


def test_fewer_nics_than_the_type_has_is_a_warning_never_a_stop():
    w, out = watch("p5.48xlarge", "true")
    p5en_hosts(w)
    w.finish()
    (line,) = said(out)
    assert line.startswith("[transport] warning: node worker-1: only 16 of 32 EFA "
                           "interfaces in use")
    assert not w.stop.is_set()


def test_unreachable_peers_after_efa_was_chosen():
    # aws/aws-ofi-nccl#663's message after the p4d start-up lines (inline)
    w, out = watch("p4d.24xlarge", "true", count=1)
    feed(w, "master", lines(P4D_OFI_140))
    assert said(out)[0].startswith("[transport] NET/OFI efa on every node")
    w.add("master", "h:1:2 [0] nccl_net_ofi_rdma:1 NCCL WARN NET/OFI Unable to insert "
                    "remote address into address vector for device 1.")
    assert "EFA is chosen but the nodes cannot reach each other" in said(out)[1]
    assert w.stop.is_set() and "security group" in said(out)[1]


def test_lines_that_are_not_nccls_are_not_kept_and_a_node_keeps_at_most_max_lines():
    w, _ = watch()
    feed(w, "master", ["epoch 1 loss 0.5", "Using network Socket"] +
         ["h:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"] * (MAX_LINES + 5))
    assert len(w.lines["master"]) == MAX_LINES and "master" not in w.decided


# -- wired into train's follow --------------------------------------------------------

def _printer(job_id: str) -> SimpleNamespace:
    final = jobfiles.state_of({"job_id": job_id, "state": "succeeded"})
    return SimpleNamespace(states={"master": final}, tails={}, totals={})


def test_train_stops_a_job_on_sockets_under_efa_true(monkeypatch):
    stopped: list[tuple[object, str]] = []

    def follow_logs(jc, job_id, *, on_line, stop, **_):
        for line in lines(SAGEMAKER_FALLBACK) + ["never read: the follow ended"]:
            if stop.is_set():
                break
            on_line("worker-1", line)
        return _printer(job_id)

    def stop_job(jc, job_id, grace=None):
        stopped.append((jc.pool, job_id))
        state = jobfiles.state_of({"job_id": job_id, "state": "stopped"})
        return StopResult(jc.name, job_id, {"master": NodeStop(state)}, {})  # type: ignore[arg-type]

    monkeypatch.setattr(jobs, "follow_logs", follow_logs)
    monkeypatch.setattr(jobs, "stop_job", stop_job)
    out = io.StringIO()
    outcome = follow_job(cluster("p4d.24xlarge", "true"), JOB, out, lambda _j: True)
    assert stopped == [(None, JOB)]  # on fresh connections, as Ctrl-C does
    assert outcome.state is JobStateName.STOPPED and not outcome.ok
    assert outcome.reason is not None and "NET/Socket (eth0)" in outcome.reason
    assert outcome.final is not None and outcome.final.state is JobStateName.STOPPED
    assert [f["cause"] for f in outcome.findings] == ["plugin_init_failed"]
    assert "[transport] stopping the job" in out.getvalue()


def test_train_reports_sockets_under_efa_auto_and_lets_the_job_run(monkeypatch):
    def follow_logs(jc, job_id, *, on_line, stop, **_):
        feed(SimpleNamespace(add=on_line), "master", lines(NO_PLUGIN))  # type: ignore[arg-type]
        return _printer(job_id)

    monkeypatch.setattr(jobs, "follow_logs", follow_logs)
    monkeypatch.setattr(jobs, "stop_job", lambda *a, **k: pytest.fail("stopped"))
    outcome = follow_job(cluster("p4d.24xlarge", "auto"), JOB, io.StringIO(), lambda _j: True)
    assert outcome.state is JobStateName.SUCCEEDED
    assert [f["cause"] for f in outcome.findings] == ["no_plugin"]  # decided at the end


def test_a_follow_without_efa_has_no_line_hook(monkeypatch):
    seen = {}

    def follow_logs(jc, job_id, *, on_line, stop, **_):
        seen.update(on_line=on_line, stop=stop)
        return _printer(job_id)

    monkeypatch.setattr(jobs, "follow_logs", follow_logs)
    follow_job(cluster("c5.large"), JOB, io.StringIO(), lambda _j: True)
    assert seen == {"on_line": None, "stop": None}


def test_the_log_printer_hands_each_line_to_on_line():
    got: list[tuple[str, str]] = []
    jc = SimpleNamespace(short=lambda label: {"w": "worker-1"}[label])
    printer = jobs.LogPrinter(jc, io.StringIO(), threading.Event(),  # type: ignore[arg-type]
                              on_line=lambda node, text: got.append((node, text)))
    printer("w", "Ltorchrun\th:1:1 [0] NCCL INFO Using network Socket")
    assert got == [("worker-1", "h:1:1 [0] NCCL INFO Using network Socket")]


@pytest.mark.parametrize(("type_name", "efa", "wanted"), [
    ("p4d.24xlarge", "auto", True), ("p4d.24xlarge", "true", True),
    ("p4d.24xlarge", "false", False), ("c5.large", "auto", False)])
def test_train_turns_on_nccls_start_up_lines_only_on_efa_types(monkeypatch, type_name, efa,
                                                               wanted):
    """`train`'s start: the job.json each node gets holds NCCL_DEBUG=INFO and
    NCCL_DEBUG_SUBSYS=INIT,NET for every process where the type has EFA and the spec
    wants it (the catalog's count; topology's cases cover a user's own NCCL_DEBUG)."""
    jc = cluster(type_name, efa)
    nodes = [dataclasses.replace(n, private_ip=f"127.0.0.{n.index + 2}") for n in jc.nodes]
    jc = dataclasses.replace(jc, nodes=nodes, targets=[
        Target(n, Hop(f"n{n.index}", f"127.0.0.{n.index + 2}")) for n in nodes])
    sent: dict[str, bytes] = {}
    monkeypatch.setattr(JobCluster, "run", lambda self, targets, calls, **_: sent.update(
        {label: call.stdin for label, call in calls.items()}))
    rt = SimpleNamespace(started=lambda *a, **k: None, done=lambda *a, **k: None)
    attempt.start(rt, jc, jc.spec, "python3 train.py", JOB, "/work", [20001, 20002, 20003])  # type: ignore[arg-type]
    for data in sent.values():
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            job = json.load(tar.extractfile("job.json"))  # type: ignore[arg-type]
        for process in job["processes"]:
            debug = {k: v for k, v in process["env"].items() if k.startswith("NCCL_DEBUG")}
            assert debug == ({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
                             if wanted else {})
    assert len(sent) == 2
