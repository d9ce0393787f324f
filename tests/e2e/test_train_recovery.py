"""Recovery in the sandbox, for real: a 3-node MXNet job (real parameter server on CPU)
that saves a checkpoint to the cluster's EFS after every step loses a node: a spot
interruption notice posted in the node's instance metadata (`sandbox interrupt`), or
the node frozen (`sandbox partition`). `train --max-recoveries` replaces that node only
(a new instance, same name; the other two keep their instances and run no bootstrap step
but the hosts and known-hosts updates), starts the job again, and the job resumes from
its newest checkpoint and ends with an uninterrupted run's result.

What cannot run here: EC2 itself (moto), spot capacity (the sandbox's interrupt stands in
for EC2's reclaim)."""

from __future__ import annotations

import io
import json
import os
import re
import sysconfig
import threading
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from bench import resumable
from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs.nodejobs import job_dir, job_summary
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.provision.up import do_up
from clusterkit_sandbox import imds
from clusterkit_sandbox.partition import do_partition
from clusterkit_sandbox.state import RUN_DIR, read_json
from tests import support
from tests.e2e import metadata_fence
from tests.e2e.clusters import (
    RESUMABLE_SECTIONS,
    check_untouched,
    lose_a_node,
    name_of,
    results,
    resumable_cluster,
    train_in_thread,
    whole,
)
from tests.e2e.test_train import Cluster, all_gone
from tests.integration.conftest import REGION, runtime

STEPS, PAUSE = 24, 0.4
SECTIONS = RESUMABLE_SECTIONS + "  node_timeout: 8\n"
WANT = resumable.want(STEPS, 3)  # whether a recovery came between or not
UNTOUCHED = {n: [WANT] * 4 for n in ("master", "worker-1", "worker-2")}  # every node's


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    with resumable_cluster(sandbox, tmp_path_factory.mktemp("recovery"),
                           support.unique_name("rc"), count=3, make=Cluster,
                           sections=SECTIONS.format(site=sysconfig.get_paths()["purelib"],
                                                    steps=STEPS, pause=PAUSE)) as cl:
        yield cl


@pytest.fixture(autouse=True)
def no_notice_outlives_its_test(sandbox) -> Iterator[None]:
    """A notice a failed test left posted is not the next test's to find."""
    yield
    for instance_id in read_json(sandbox.dir / RUN_DIR / imds.NOTICES_FILE, {}) or {}:
        imds.forget(sandbox.dir, instance_id)


def receipts(cluster: Cluster) -> dict[str, dict[str, str]]:
    """Node -> {step: its receipt's mtime}: a step that ran writes its receipt again."""
    found = {}
    for node in ("master", "worker-1", "worker-2"):
        [r] = do_exec(cluster.name, ["cd /var/lib/clusterkit/steps && stat -c '%n %.9Y' *"],
                      nodes=[node], rt=runtime()).values()
        found[node] = dict(line.split() for line in r.stdout.splitlines())
    return found


def resumed_steps(text: str) -> list[int]:
    return [int(s) for s in re.findall(r"resumed from step (\d+) restart 1$", text, re.M)]


def check_recovered(cluster: Cluster, before: dict[str, str], lost: str, why: str,
                    outcome: JobOutcome, text: str) -> None:
    """Only ``lost`` was replaced; the job resumed past step 0 and ended as an
    uninterrupted run would; the recovery is in the outcome and in `status`."""
    assert outcome.state == "succeeded", text
    [recovery] = outcome.recoveries
    assert dict(recovery.lost) == {lost: why}
    old, new = recovery.replaced[lost]
    assert old == before[lost] and new not in before.values()
    after = {name_of(n.index): n.instance_id for n in do_up(
        str(cluster.spec), yes=True, rt=runtime()).nodes}
    assert after == {**before, lost: new}
    steps = resumed_steps(text)
    assert len(steps) == 3 and min(steps) > 0, text  # every worker, from a checkpoint
    assert results(text) == {n: [WANT] * 4 for n in ("master", "worker-1", "worker-2")}
    assert recovery.seconds_to_running is not None and recovery.seconds_to_running > 0
    assert recovery.node_hours_lost is not None and recovery.node_hours_lost > 0
    summary = job_summary(runtime(), cluster.name)
    assert summary is not None and summary.job_id == outcome.job_id
    assert [r.replaced for r in summary.recoveries] == [recovery.replaced]
    all_gone(outcome.job_id)


def test_a_notice_checkpoints_replaces_only_that_node_and_the_job_resumes(
        sandbox, cluster: Cluster):
    before = whole(cluster)
    kept = receipts(cluster)
    outcome, text = lose_a_node(cluster, lambda: imds.do_interrupt(
        str(sandbox.dir), cluster.name, "worker-2", notice=30))
    assert len(re.findall(r"checkpoint signal: saved at step", text)) == 3, text
    check_recovered(cluster, before, "worker-2", "notice", outcome, text)
    now = receipts(cluster)
    for node in ("master", "worker-1"):  # no bootstrap step but the new addresses'
        changed = {step for step, when in now[node].items() if kept[node].get(step) != when}
        assert changed <= {"hosts", "ssh"}, (node, changed)


def test_a_lost_master_is_replaced_too(sandbox, cluster: Cluster):
    """The master is a node like the others: a notice on it checkpoints the job, a new
    master is launched (the workers keep their instances) and the job resumes there."""
    before = whole(cluster)
    outcome, text = lose_a_node(cluster, lambda: imds.do_interrupt(
        str(sandbox.dir), cluster.name, "master", notice=30))
    check_recovered(cluster, before, "master", "notice", outcome, text)


def test_a_partitioned_node_is_replaced_after_node_timeout(sandbox, cluster: Cluster):
    before = whole(cluster)
    outcome, text = lose_a_node(cluster, lambda: do_partition(
        str(sandbox.dir), cluster.name, "worker-1"))
    check_recovered(cluster, before, "worker-1", "unreachable", outcome, text)
    # the evidence (issue 42): the master's heartbeats, confirmed by EC2 (its status check
    # asked as the user's policies allow)
    assert outcome.recoveries[0].evidence["worker-1"] == (
        "silent 8 s to the master (node_timeout 8 s); EC2: running, status check ok")


def test_metadata_endpoint_failing_for_20_s_is_no_evidence(sandbox, cluster: Cluster):
    """issue 42, chaos: worker-1's instance metadata answers 500s and times out in turn
    for 20 s (the rest of the job): its watcher reads no notice, and nothing recovers."""
    before = whole(cluster)
    try:
        outcome, text = lose_a_node(cluster, lambda: imds.do_imds_fault(
            str(sandbox.dir), cluster.name, "worker-1", seconds=20, mode="mixed"))
    finally:  # over (the job ends before the 20 s do): the next test's metadata answers
        imds.do_imds_fault(str(sandbox.dir), cluster.name, "worker-1", seconds=0)
    check_untouched(cluster, before, outcome, text, UNTOUCHED)
    [log] = do_exec(cluster.name, [f"cat {job_dir(outcome.job_id)}/supervisor.log"],
                    nodes=["worker-1"], rt=runtime()).values()
    assert "interruption watcher: " in log.stdout, log.stdout  # the fault was seen


def test_a_partition_shorter_than_node_timeout_healed_is_no_evidence(sandbox, cluster: Cluster):
    """issue 42, chaos: worker-1 frozen for 3 s (node_timeout 8) and thawed: the job
    goes on and nothing recovers."""
    before = whole(cluster)

    def blip() -> None:
        do_partition(str(sandbox.dir), cluster.name, "worker-1")
        try:
            support.hold_fault(3, "worker-1 partitioned (shorter than node_timeout)")
        finally:
            do_partition(str(sandbox.dir), cluster.name, "worker-1", heal=True)

    outcome, text = lose_a_node(cluster, blip)
    check_untouched(cluster, before, outcome, text, UNTOUCHED)


def test_a_notice_during_a_recovery_is_a_second_recovery(sandbox, cluster: Cluster):
    """issue 42, chaos: worker-2 gets a notice; while it is being replaced, worker-1 gets
    one (two notices in a row on different nodes, the second during a recovery): the
    restarted job is interrupted at once, worker-1 is replaced in a second recovery, and
    the job still ends as an uninterrupted run; the master keeps its instance."""
    before = whole(cluster)
    out = io.StringIO()
    thread, done = train_in_thread(cluster, out, max_recoveries=2)
    support.wait_for(lambda: "] step 3" in out.getvalue(), "the job at step 3", 180)
    imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-2", notice=60)
    support.wait_for(lambda: imds.running_instance(  # terminated by the first recovery
        str(sandbox.dir), cluster.name, "worker-2", REGION) != before["worker-2"],
        "the first recovery", 180, interval=0.5)
    imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-1", notice=60)
    thread.join(600)
    [outcome] = done
    text = out.getvalue()
    assert outcome.state == "succeeded", text
    assert [dict(r.lost) for r in outcome.recoveries] == [
        {"worker-2": "notice"}, {"worker-1": "notice"}], text
    assert all("interruption notice" in r.evidence[n] for r in outcome.recoveries
               for n in r.lost)
    assert results(text) == {n: [WANT] * 4 for n in ("master", "worker-1", "worker-2")}
    after = {name_of(n.index): n.instance_id for n in do_up(
        str(cluster.spec), yes=True, rt=runtime()).nodes}
    assert after["master"] == before["master"]
    assert not {after["worker-1"], after["worker-2"]} & set(before.values())


def test_attach_takes_a_detached_job_over_and_recovers_it(sandbox, cluster: Cluster):
    """`train --detach` returns at once; `train --attach` (another terminal's) follows the
    job and, when a notice takes worker-1, recovers it with the command the job's record
    keeps."""
    from clusterkit.cluster.jobs.attach import do_attach

    before = whole(cluster)
    started = cluster.train(detach=True)
    assert started.detached and started.state == "running"
    out = io.StringIO()
    done: list[JobOutcome] = []
    thread = threading.Thread(target=lambda: done.append(do_attach(
        str(cluster.spec), workdir_option=str(cluster.work), out=out, max_recoveries=1,
        rt=runtime())))
    thread.start()
    support.wait_for(lambda: "] step 3" in out.getvalue(), "the job at step 3", 180)
    imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-1", notice=30)
    thread.join(600)
    [outcome] = done
    text = out.getvalue()
    assert outcome.job_id != started.job_id, text
    check_recovered(cluster, before, "worker-1", "notice", outcome, text)


def test_a_rebalance_recommendation_boots_a_standby_that_the_notice_swaps_in(
        sandbox, cluster: Cluster):
    """A rebalance recommendation for worker-2: `train` launches and bootstraps its
    standby while the job runs; the interruption notice that follows swaps the standby
    in (its instance is worker-2's now) and no instance is launched after the notice."""
    import boto3

    from clusterkit.cluster.jobs.train import do_train

    before = whole(cluster)
    events: list = []
    rt = runtime()
    rt.report = events.append
    out = io.StringIO()
    done: list[JobOutcome] = []
    thread = threading.Thread(target=lambda: done.append(do_train(
        str(cluster.spec), workdir_option=str(cluster.work), out=out, max_recoveries=1,
        rt=rt)))
    thread.start()
    support.wait_for(lambda: "] step 3" in out.getvalue(), "the job at step 3", 180)
    # the job waits at its next step until the notice is posted (a standby's boot is not
    # to race the job's end)
    do_exec(cluster.name, ["touch /efs/ckpt/hold"], nodes=["master"], rt=runtime())
    imds.post(sandbox.dir, before["worker-2"], rebalance=True)
    support.wait_for(lambda: any("is ready" in e.text for e in events), "the standby", 180)
    [standby] = [e.text.split()[1] for e in events if "is ready" in e.text]
    ec2 = boto3.client("ec2", "us-east-1")
    standby_launched = ec2.describe_instances(InstanceIds=[standby])["Reservations"][0][
        "Instances"][0]["LaunchTime"]
    posted = imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-2", notice=30)
    do_exec(cluster.name, ["rm -f /efs/ckpt/hold"], nodes=["master"], rt=runtime())
    try:
        thread.join(600)
    finally:
        imds.forget(sandbox.dir, posted["instance_id"])  # a failed test leaves no notice
    [outcome] = done
    text = out.getvalue()
    assert "[worker-2] spot rebalance notice" in text
    check_recovered(cluster, before, "worker-2", "notice", outcome, text)
    [recovery] = outcome.recoveries
    assert recovery.replaced["worker-2"][1] == standby
    assert recovery.from_standby == ("worker-2",) and "by its standby" in recovery.describe()
    launched = [i["LaunchTime"] for r in ec2.describe_instances(Filters=[
        {"Name": "tag:clusterkit:cluster", "Values": [cluster.name]}])["Reservations"]
        for i in r["Instances"]]
    assert max(launched) == standby_launched  # the standby was the last launch: none after it


def test_without_recoveries_an_interrupted_job_fails_naming_the_notice(
        sandbox, cluster: Cluster):
    whole(cluster)
    out = io.StringIO()
    thread, done = train_in_thread(cluster, out, max_recoveries=0)
    support.wait_for(lambda: "] step 2" in out.getvalue(), "the job at step 2", 180)
    posted = imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-1", notice=600)
    try:
        thread.join(300)
    finally:
        imds.forget(sandbox.dir, posted["instance_id"])
    [outcome] = done
    assert outcome.state == "interrupted" and outcome.recoveries == ()
    assert "node 1: spot interruption notice" in (outcome.reason or "")
    assert "no recovery left" in (outcome.reason or "")
    all_gone(outcome.job_id)
    assert cluster.active() == []


def controller_processes(endpoint: str | None = None) -> list[int]:
    """The recovery controllers running on this machine (every sandbox node shares its
    PID space); with ``endpoint``, only those of that sandbox (its AWS endpoint in their
    environment: another test process's sandbox may run a controller meanwhile)."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if b"recovery-controller" not in handle.read().split(b"\0"):
                    continue
            if endpoint is None or \
                    environment_of(int(entry)).get("AWS_ENDPOINT_URL") == endpoint:
                found.append(int(entry))
        except (OSError, ValueError):
            continue
    return found


def environment_of(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/environ", "rb") as handle:
        pairs = [p.decode().partition("=") for p in handle.read().split(b"\0") if p]
    return {name: value for name, _, value in pairs}


def test_a_detached_job_recovers_with_the_client_gone(sandbox, cluster: Cluster):
    """`train --detach` with a recovery allowed returns at once and leaves a controller
    on the master, running on the master's instance role (no credential of the user's
    anywhere in it). A notice takes worker-1 with no client connected: the controller
    replaces that node only and restarts the job, which resumes from its checkpoint and
    ends as an uninterrupted run would; then the controller exits, its key taken off
    every node and the master's node profile given back."""
    from clusterkit.cluster.jobs import controller
    from clusterkit.cluster.jobs.nodejobs import open_job_cluster

    before = whole(cluster)
    started = cluster.train(detach=True, max_recoveries=1)
    assert started.detached and started.state == "running"
    [pid] = controller_processes(sandbox.endpoint)
    env = environment_of(pid)
    secrets = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
               "AWS_PROFILE", "SSH_AUTH_SOCK"}
    assert not secrets & env.keys(), env
    assert env["CLUSTERKIT_CONTROLLER_KEY"] == f"{controller.PRIVATE}/{controller.KEY}"
    assert uid_of(pid) not in (0, 1000, os.geteuid())  # its own user, not the login's
    said = controller_log(cluster)
    assert f"controller of job {started.job_id}" in said, said
    assert "AWS credentials: iam-role" in said, said
    assert controller.alive(open_job_cluster(runtime(), cluster.name))
    role = metadata_fence.check_fenced(sandbox.endpoint, cluster.name, before["master"])
    support.wait_for(lambda: checkpoints(cluster) >= 3, "the job at step 3", 180)
    # the job waits at its next step until the notice has ended it (on a loaded machine
    # its last steps could outrun the notice)
    do_exec(cluster.name, ["touch /efs/ckpt/hold"], nodes=["master"], rt=runtime())
    imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-1", notice=30)

    def first_ended() -> bool:  # None: the nodes not read this time (worker-1 going)
        now = job_summary(runtime(), cluster.name)
        return now is not None and (now.job_id != started.job_id or now.state != "running")

    support.wait_for(first_ended, "the notice ending the first run", 300, interval=1)
    do_exec(cluster.name, ["rm -f /efs/ckpt/hold"], nodes=["master"], rt=runtime())
    support.wait_for(lambda: not controller_processes(sandbox.endpoint), "the controller's end", 600,
                     interval=2)
    said = controller_log(cluster)
    summary = job_summary(runtime(), cluster.name)
    assert summary is not None and summary.job_id != started.job_id, said
    assert summary.state == "succeeded", said
    [recovery] = summary.recoveries
    assert dict(recovery.lost) == {"worker-1": "notice"}
    old, new = recovery.replaced["worker-1"]
    assert old == before["worker-1"] and new not in before.values()
    text = job_log_text(cluster, summary.job_id)
    steps = resumed_steps(text)
    assert len(steps) == 3 and min(steps) > 0, text
    assert results(text) == {n: [WANT] * 4 for n in ("master", "worker-1", "worker-2")}
    assert f"job {summary.job_id} succeeded" in said, said
    check_retired(cluster, before["master"], said)
    metadata_fence.check_unfenced(sandbox.endpoint, cluster.name, before["master"], role,
                                  said)


def uid_of(pid: int) -> int:
    with open(f"/proc/{pid}/status") as handle:
        return next(int(line.split()[1]) for line in handle if line.startswith("Uid:"))


def check_retired(cluster: Cluster, master: str, said: str) -> None:
    """The controller retired as it exited (issue 39): its key is on no node (the one it
    launched included), and the master wears the nodes' instance profile again."""
    assert "took the controller's key off 3 node(s)" in said, said
    assert f"gave the master {master} its node profile back" in said, said
    [public] = do_exec(cluster.name, ["cat ~/.clusterkit/controller/id_ed25519.pub"],
                       nodes=["master"], rt=runtime()).values()
    key = public.stdout.split()[1]
    # wherever a node's sshd reads keys (a node the controller launched got its key by
    # the launch's cloud-config)
    held = do_exec(cluster.name, ["cat ~/.ssh/authorized_keys /etc/clusterkit-node/"
                                  "authorized_keys 2>/dev/null || true"], rt=runtime())
    assert len(held) == 3 and all(key not in r.stdout for r in held.values()), held
    outputs = {o["OutputKey"]: o["OutputValue"] for o in boto3.client(
        "cloudformation", REGION).describe_stacks(StackName=f"clusterkit-{cluster.name}")[
        "Stacks"][0]["Outputs"]}
    worn = boto3.client("ec2", REGION).describe_iam_instance_profile_associations(Filters=[
        {"Name": "instance-id", "Values": [master]}])["IamInstanceProfileAssociations"]
    assert [a["IamInstanceProfile"]["Arn"] for a in worn if a["State"] == "associated"] == \
        [outputs["InstanceProfileArn"]]


def controller_log(cluster: Cluster) -> str:
    [log] = do_exec(cluster.name, ["cat ~/.clusterkit/controller/controller.log"],
                    nodes=["master"], rt=runtime()).values()
    return log.stdout


def checkpoints(cluster: Cluster) -> int:
    [r] = do_exec(cluster.name, ["ls /efs/ckpt 2>/dev/null | grep -c ckpt- || true"],
                  nodes=["master"], rt=runtime()).values()
    return int(r.stdout.strip() or 0)


def job_log_text(cluster: Cluster, job_id: str) -> str:
    """Every worker's log of ``job_id``, as `train` prints it (``[node/worker-0] line``)."""
    from clusterkit.cluster.jobs.nodejobs import follow_logs, open_job_cluster

    out = io.StringIO()
    follow_logs(open_job_cluster(runtime(), cluster.name), job_id, keep_following=False,
                out=out)
    return out.getvalue()


# The module's job as an elastic torchrun job of the DDP example (torch's site-packages
# on PYTHONPATH, gloo on loopback), min 2 of the 3 nodes.
ELASTIC = SECTIONS.replace("framework: mxnet", "framework: torchrun").replace(
    "python3 resumable.py {steps} {pause}",
    "python3 torchrun_ddp.py --steps {steps} --step-seconds {pause} --out /efs/out").replace(
    "  servers_per_node: 1\n", "").replace(
    "PYTHONPATH: {site}}}", "PYTHONPATH: {site}, GLOO_SOCKET_IFNAME: lo}}") + \
    "  elastic: {{min: 2}}\n"


def elastic_job(cluster: Cluster, label: str) -> tuple[Path, dict[str, str]]:
    """The DDP example as an elastic job of 300 steps of 0.1 s (spec ``NAME-label``), the
    cluster made whole and no output left: the spec, and node name -> instance id."""
    from tests.e2e.test_train import DDP_EXAMPLE, torch_spec

    site = re.search(r"PYTHONPATH: (\S+?),", torch_spec(cluster, 3).read_text())
    assert site is not None
    spec = cluster.spec.with_name(f"{cluster.name}-{label}.yaml")
    spec.write_text(cluster.spec.read_text().split("storage:")[0] + ELASTIC.format(
        site=site.group(1), steps=300, pause=0.1))
    (cluster.work / DDP_EXAMPLE.name).write_text(DDP_EXAMPLE.read_text())
    before = whole(cluster)
    do_exec(cluster.name, ["rm -rf /efs/out"], nodes=["master"], rt=runtime())
    return spec, before


@pytest.mark.torch  # torch on the nodes: scripts/install.sh's interpreter
def test_an_elastic_torchrun_job_goes_on_smaller_while_its_node_is_replaced(
        sandbox, cluster: Cluster, monkeypatch: pytest.MonkeyPatch):
    """issue 42: an elastic torchrun job (train.elastic min 2 of 3, gloo on CPU) whose
    worker-2 gets a notice goes on with 2 nodes from its checkpoint while worker-2 is
    replaced, and grows back to 3 when the replacement's agent joins: one job (no
    restart), one replacement (no other recovery), every rank's parameters the same.

    Mocked: the replacement's launch taking minutes (a GPU node's on AWS; the sandbox's
    takes seconds, less than torch's restart on this machine): the replacement waits
    until the job has trained a step on 2 nodes."""
    from clusterkit.cluster.jobs import elastic
    from clusterkit.cluster.jobs.top import open_top
    from clusterkit.cluster.jobs.train import do_train

    spec, before = elastic_job(cluster, "elastic")
    out = io.StringIO()

    def on_two_nodes() -> bool:
        smaller = out.getvalue().partition("world 2 of 3")[2]
        return re.search(r"ddp rank 0: step \d+/", smaller) is not None

    def held(*args: object) -> None:  # the replacement as slow as a launch on AWS
        support.wait_for(on_two_nodes, "a step on 2 nodes", 120, interval=0.2)
        left(*args)

    left = elastic.wait_left
    monkeypatch.setattr(elastic, "wait_left", held)
    done: list[JobOutcome] = []
    thread = threading.Thread(target=lambda: done.append(do_train(
        str(spec), workdir_option=str(cluster.work), out=out, max_recoveries=1,
        rt=runtime())))
    thread.start()
    support.wait_for(lambda: "step 5/" in out.getvalue() or not thread.is_alive(),
                     "the job at step 5", 180)
    assert thread.is_alive(), out.getvalue()
    imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-2", notice=30)
    thread.join(600)
    [outcome] = done
    text = out.getvalue()
    assert outcome.state == "succeeded", text
    [recovery] = outcome.recoveries
    assert dict(recovery.lost) == {"worker-2": "notice"}
    worlds = re.findall(r"\] ddp rank 0: world (\d) of 3", text)
    assert worlds[0] == "3" and "2" in worlds and worlds[-1] == "3", worlds
    assert on_two_nodes()
    # the joined node's log is in train's output: its agent's last line with the others'
    ended = re.findall(r"^\[(\S+?)/\S+\] ddp rank \d/3 .* OK$", text, re.M)
    assert sorted(ended) == ["master", "worker-1", "worker-2"], text
    # one job throughout: the job that lost worker-2 is the one that ended, never restarted
    assert recovery.job == outcome.job_id and outcome.final is not None
    assert outcome.final.recovery.restart_count == 0
    assert [n for _, n in outcome.final.sizes] == [3, 2, 3]  # the master's record
    with open_top(cluster.name, job_id=outcome.job_id, rt=runtime()) as top:
        shown = top.frame()  # `top` of the ended job: its size over time, until its end
    assert shown.size_lines()[0].startswith("nodes over time (of 3): 3 ("), shown.size_lines()
    [ranks] = do_exec(cluster.name, ["for f in /efs/out/rank-*.json; do cat $f; echo; done"],
                      nodes=["master"], rt=runtime()).values()
    results = [json.loads(line) for line in ranks.stdout.splitlines() if line.strip()]
    assert len(results) == 3 and all(r["ok"] and r["world_size"] == 3 for r in results)
    after = {name_of(n.index): n.instance_id for n in do_up(
        str(cluster.spec), yes=True, rt=runtime()).nodes}
    assert after["master"] == before["master"] and after["worker-1"] == before["worker-1"]
    assert after["worker-2"] != before["worker-2"]


@pytest.mark.torch  # torch on the nodes: scripts/install.sh's interpreter
def test_a_detached_elastic_job_s_controller_replaces_the_node_that_left(
        sandbox, cluster: Cluster):
    """issue 42: `train --detach` of an elastic torchrun job (min 2 of 3) with a recovery
    allowed: worker-2's notice, with no client connected, makes it leave; the job goes on
    and the master's controller (`train --attach`'s follow, ``elastic.growth``) replaces
    the node, whose agent joins the same job: one job, never restarted, back at 3."""
    from clusterkit.cluster.jobs.train import do_train

    spec, before = elastic_job(cluster, "elastic-detached")
    started = do_train(str(spec), workdir_option=str(cluster.work), detach=True,
                       max_recoveries=1, rt=runtime())
    assert started.detached and started.state == "running"
    support.wait_for(lambda: "step 5/" in job_log_text(cluster, started.job_id),
                     "the job at step 5", 180, interval=1)
    imds.do_interrupt(str(sandbox.dir), cluster.name, "worker-2", notice=30)
    support.wait_for(lambda: not controller_processes(sandbox.endpoint),
                     "the controller's end", 600, interval=2)
    said = controller_log(cluster)
    summary = job_summary(runtime(), cluster.name)
    assert summary is not None and summary.job_id == started.job_id, said  # no restart
    assert summary.state == "succeeded", said
    assert f"job {started.job_id} goes on without worker-2" in said, said
    assert f"worker-2 joins job {started.job_id}" in said, said
    master = summary.nodes["master"]
    assert master is not None and master.recovery.restart_count == 0
    assert [n for _, n in master.sizes] == [3, 2, 3], said
    [ranks] = do_exec(cluster.name, ["for f in /efs/out/rank-*.json; do cat $f; echo; done"],
                      nodes=["master"], rt=runtime()).values()
    results_ = [json.loads(line) for line in ranks.stdout.splitlines() if line.strip()]
    assert len(results_) == 3 and all(r["ok"] and r["world_size"] == 3 for r in results_)
    after = {name_of(n.index): n.instance_id for n in do_up(
        str(cluster.spec), yes=True, rt=runtime()).nodes}
    assert after["master"] == before["master"] and after["worker-1"] == before["worker-1"]
    assert after["worker-2"] != before["worker-2"]
