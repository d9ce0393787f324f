"""`exec` / `ssh` end to end in the sandbox: a 3-node cluster brought up by `up` (moto
server + a real OpenSSH sshd per node on loopback), reached with Fabric and with the
system `ssh` binary, through the master, with a real ssh-agent. Nothing is mocked.

One cluster for the module (about 2 s to bring up), shared by tests that may run in
any order or alone (`-k`): each restores what it changes, and the fixture's teardown
takes the cluster down and checks that nothing of it is left."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest

from clusterkit.cluster.access.remote_ops import cluster_nodes, do_exec, do_ssh
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import GroupError, RemoteError
from clusterkit.events import Collect, Kind
from clusterkit.plan.nodes import node_name
from clusterkit.remote import fanout, known_hosts
from clusterkit.remote.address import targets
from clusterkit.remote.connect import Login
from clusterkit_sandbox import console as sandbox_console
from tests import support
from tests.e2e.clusters import running, shared_file, user_session
from tests.e2e.test_up_down import SANDBOX_AMI
from tests.integration.conftest import runtime, write_spec

CLI = str(Path(sys.executable).with_name("clusterkit"))


@dataclass
class Cluster:
    name: str
    spec: Path
    key: Path  # in the agent; the spec names no identity file
    fingerprint: str  # SHA256:... of the key
    nodes: list[dict[str, Any]]  # from `up`: index order
    hostnames: list[str]  # of the sandbox nodes, index order
    agent_sock: str

    @property
    def known(self) -> Path:
        return known_hosts.known_hosts_path(self.name)

    @property
    def host_keys(self) -> Path:
        return known_hosts.host_keys_path(self.name)


@pytest.fixture(scope="module")
def cluster(sandbox, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    support.require_root("the sandbox's SSH nodes")
    where = tmp_path_factory.mktemp("execssh")
    name = support.unique_name("ex")
    spec = write_spec(where, name=name, count=3, ami=SANDBOX_AMI, placement_group=False)
    with user_session(sandbox, where) as sock:
        key = where / "id_ed25519"  # in the agent
        with running(spec, name, timeout=120) as up:
            nodes = up.to_json()["nodes"]
            # `up` bootstrapped the nodes: each is named after the cluster and its index
            yield Cluster(name, spec, key, support.fingerprint(key), nodes,
                          [node_name(name, n["index"]) for n in nodes], sock)
        # `down` left no AWS resource of the cluster, and its known_hosts file went too
        assert not known_hosts.known_hosts_path(name).exists()


def _cli(*args: str, check: bool = False) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, check=check)


def test_exec_runs_everywhere_workers_through_the_master(cluster: Cluster):
    live = StringIO()
    results = do_exec(cluster.name, ["hostname"], rt=runtime(), out=live)
    assert len(results) == 3
    assert [r.stdout.strip() for r in results.values()] == cluster.hostnames
    assert len(set(cluster.hostnames)) == 3
    master = cluster.nodes[0]["ssh_address"]
    assert [r.via for r in results.values()] == [None, master, master]
    assert [r.node.index for r in results.values()] == [0, 1, 2]
    assert all(r.ok and r.exit_code == 0 for r in results.values())
    assert list(results.succeeded) == list(results) and not results.failed
    lines = sorted(live.getvalue().splitlines())
    assert lines == sorted(f"[{label}] {r.stdout.strip()}" for label, r in results.items())


def test_exec_failure_on_one_node_keeps_every_result(cluster: Cluster):
    worker2 = cluster.hostnames[2]
    command = ["test", '"$(hostname)"', "!=", worker2]
    with pytest.raises(GroupError) as caught:
        do_exec(str(cluster.spec), command, rt=runtime())
    results = caught.value.group
    assert [r.exit_code for r in results.values()] == [0, 0, 1]
    assert [r.ok for r in results.values()] == [True, True, False]
    (failed,) = results.failed
    assert failed == list(results)[2] and len(results.succeeded) == 2
    assert failed in caught.value.message and "1 of 3" in caught.value.message

    proc = _cli("--json", "exec", cluster.name, "--", *command)  # the real CLI: exit 1
    assert proc.returncode == 1, proc.stderr
    data = json.loads(proc.stdout)  # one JSON error object, every node's result in it
    assert [r["exit_code"] for r in data["results"].values()] == [0, 0, 1]
    assert "command failed on 1 of 3 node(s)" in data["error"] and data["exit_code"] == 1
    assert "Traceback" not in proc.stderr


def test_ssh_to_a_worker_goes_through_the_master(cluster: Cluster):
    master, worker = cluster.nodes[0]["ssh_address"], cluster.nodes[2]["ssh_address"]
    printed = _cli("ssh", cluster.name, "2", "--print", check=True).stdout.split()
    assert printed[printed.index("-J") + 1] == f"ubuntu@{master}"
    assert printed[-1] == f"ubuntu@{worker}" and "-A" in printed
    assert f"UserKnownHostsFile={cluster.known}" in printed
    assert "StrictHostKeyChecking=yes" in printed

    proc = _cli("ssh", cluster.name, "2", "--", "hostname")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == cluster.hostnames[2]
    assert _cli("ssh", cluster.name, "--", "hostname", check=True).stdout.strip() == \
        cluster.hostnames[0]

    # proof of the path: with the master's line in known_hosts wrong, the printed command
    # cannot reach the worker (OpenSSH checks the -J hop against the same file)
    saved = cluster.known.read_text()
    try:
        _replace_key(cluster.known, master, _other_key(cluster.key.parent))
        proc = subprocess.run([*printed, "hostname"], capture_output=True,
                              text=True, timeout=60, stdin=subprocess.DEVNULL)
        assert proc.returncode == 255
        assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in proc.stderr
    finally:
        cluster.known.write_text(saved)


def test_agent_is_forwarded_only_with_the_option_and_never_copied(cluster: Cluster):
    """`exec` leaves SSH_AUTH_SOCK unset on every node (job code cannot borrow the agent);
    with -A it is set on every node, workers included, and the agent on this machine
    answers there; no key file ever lands on a node."""
    probe = ['echo', '"agent=[${SSH_AUTH_SOCK:-}]";', "ssh-add", "-l;", "ls", "-A", "~/.ssh",
             "||", "true"]
    plain = do_exec(cluster.name, probe, rt=runtime())
    assert len(plain) == 3
    for result in plain.values():
        assert "agent=[]" in result.stdout
        assert cluster.fingerprint not in result.stdout
    forwarded = do_exec(cluster.name, probe, forward_agent=True, rt=runtime())
    assert list(forwarded) == list(plain)
    for result in forwarded.values():
        assert "agent=[]" not in result.stdout and "agent=[/" in result.stdout
        assert cluster.fingerprint in result.stdout  # the agent on this machine answers
        assert "id_ed25519" not in result.stdout  # and no key file landed on the node
    proc = _cli("--json", "exec", cluster.name, "-A", "--node", "2", "--",
                "ssh-add", "-l")  # the real CLI's flag
    assert proc.returncode == 0, proc.stderr
    assert cluster.fingerprint in proc.stdout


def test_other_fan_outs_forward_no_agent_and_speak_aes_gcm(cluster: Cluster):
    """Bootstrap and job calls log in with the agent but do not forward it (root on a
    node could use a forwarded agent while connected); every connection, direct or
    through the master, negotiates AES-GCM (its tag is checked in C)."""
    nodes = cluster_nodes(runtime(), cluster.name, ["us-east-1"])
    dials = targets(nodes, nodes)
    results = fanout.run_all(Login(cluster.name), dials, 'echo "agent=[$SSH_AUTH_SOCK]"')
    assert [r.stdout.strip() for r in results.values()] == ["agent=[]"] * 3
    with fanout.Connections(Login(cluster.name), dials) as pool:
        fanout.run_each(Login(cluster.name), dials, {t.hop.label: "true" for t in dials},
                        pool=pool)
        used = [c for c in pool.conns.values() if not isinstance(c, RemoteError)]
        assert len(used) == 3
        assert {c.transport.remote_cipher for c in used} == {"aes128-gcm@openssh.com"}
        assert {c.transport.local_cipher for c in used} == {"aes128-gcm@openssh.com"}


def test_chain_each_runs_every_node_at_its_own_pace(cluster: Cluster, sandbox):
    """A node's next command starts when its own last one ended, not when the slowest
    node's did (bootstrap: a node's steps start as soon as its facts are in)."""
    nodes = cluster_nodes(runtime(), cluster.name, ["us-east-1"])
    dials = targets(nodes, nodes)
    slow = dials[0].hop.label
    said: list[tuple[str, int]] = []  # (node, its step) in the order the client saw them
    # the slow node's first command waits for this file (in the sandbox's shared
    # directory), which the client makes once every other node has asked for its step 2
    go, go_in_node = shared_file(sandbox.dir, f"ck-chain-{uuid.uuid4().hex[:8]}")
    others_done = {(t.hop.label, 2) for t in dials[1:]}

    def next_command(target, last):
        step = 0 if last is None else int(last.stdout.split()[-1]) + 1
        said.append((target.hop.label, step))
        if others_done <= set(said):
            go.touch()
        if step == 2:
            return None
        pause = (f"for _ in $(seq 600); do [ -e {go_in_node} ] && break; sleep 0.1; done; "
                 if target.hop.label == slow and step == 0 else "")
        return f"{pause}echo {step}"

    try:
        results = fanout.chain_each(Login(cluster.name), dials, next_command)
    finally:
        go.unlink(missing_ok=True)
    assert {label: [r.stdout.split() for r in rs] for label, rs in results.items()} == {
        t.hop.label: [["0"], ["1"]] for t in dials}
    # the other nodes went through both their commands while the slow one slept
    slow_first_done = said.index((slow, 1))
    for t in dials[1:]:
        assert said.index((t.hop.label, 2)) < slow_first_done, said


def test_identity_file_without_agent(cluster: Cluster, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("SSH_AUTH_SOCK")
    with pytest.raises(GroupError) as caught:
        do_exec(cluster.name, ["true"], nodes=["master"], rt=runtime())
    assert "authentication failed" in caught.value.message
    assert "ssh-add" in caught.value.hint
    results = do_exec(cluster.name, ["echo", "$USER"], identity_file=str(cluster.key),
                      rt=runtime())
    assert [r.stdout.strip() for r in results.values()] == ["ubuntu"] * 3  # login name


def test_timeout_fails_that_node_only(cluster: Cluster):
    """Nodes 0 and 2 sleep past the timeout and fail with that reason; node 1's command
    (a `test`) ends well within it, however loaded the machine; the call does not wait
    for their sleep: the marker they would write after it is absent."""
    marker = f"/tmp/ck-slept-{uuid.uuid4().hex[:8]}"
    with pytest.raises(GroupError) as caught:
        do_exec(cluster.name, ["test $(hostname) = " + cluster.hostnames[1], "||",
                               "{", "sleep", "60;", "touch", marker, ";", "}"],
                timeout=4, rt=runtime())
    after = do_exec(cluster.name, ["test", "!", "-e", marker, "&&", "echo", "absent"],
                    rt=runtime())
    assert [r.stdout.strip() for r in after.values()] == ["absent"] * 3
    results = caught.value.group
    assert [r.ok for r in results.values()] == [False, True, False]
    assert all("timed out after 4 s" in r.error for r in results.failed.values())


def test_host_key_mismatch_or_missing_is_refused(cluster: Cluster):
    """The recorded key of an instance (host_keys.json, from which known_hosts is
    written) is tampered: the node is refused with both fingerprints."""
    saved, saved_keys = cluster.known.read_text(), cluster.host_keys.read_text()
    master, worker1 = (cluster.nodes[i]["instance_id"] for i in (0, 1))
    worker1_address = cluster.nodes[1]["ssh_address"]
    labels = [f"{cluster.name}-{role}" for role in ("master-0", "worker-1", "worker-2")]
    try:
        _replace_instance_key(cluster, worker1, _other_key(cluster.key.parent))
        with pytest.raises(GroupError) as caught:
            do_exec(cluster.name, ["true"], rt=runtime())
        res = caught.value.group
        assert [res[label].ok for label in labels] == [True, False, True]
        assert "host key does not match" in res[labels[1]].error
        assert res[labels[1]].error.count("SHA256:") == 2
        assert f"--accept-new-host-key {labels[1]}" in res[labels[1]].hint
        assert res[labels[1]].exit_code is None

        _replace_instance_key(cluster, master, _other_key(cluster.key.parent))
        with pytest.raises(GroupError) as caught:
            do_exec(cluster.name, ["true"], rt=runtime())
        res = caught.value.group
        assert not res.succeeded
        assert "through gateway" in res[labels[2]].error  # refused at the master

        cluster.host_keys.write_text(saved_keys)
        keys = json.loads(saved_keys)
        del keys[worker1]
        cluster.host_keys.write_text(json.dumps(keys))
        cluster.known.write_text("".join(line + "\n" for line in saved.splitlines()
                                         if not line.startswith(worker1_address + " ")))
        with pytest.raises(RemoteError) as caught:
            do_exec(cluster.name, ["true"], nodes=["1"], rt=runtime())
        assert "no host key recorded" in caught.value.message
        assert "clusterkit up" in caught.value.hint
        with pytest.raises(RemoteError, match="no host key recorded"):
            do_ssh(cluster.name, "1", rt=runtime())
    finally:
        cluster.known.write_text(saved)
        cluster.host_keys.write_text(saved_keys)


def test_changed_host_key_refused_by_up_exec_ssh_until_accepted(cluster: Cluster):
    """The same instance id presenting another key than the one recorded for it: `up`'s
    probe, `exec` and `ssh` refuse it, showing both fingerprints; the accept flag takes
    the new key for that one node (here the recorded key is made wrong instead of the
    node's: the same mismatch, seen from the other side)."""
    saved, saved_keys = cluster.known.read_text(), cluster.host_keys.read_text()
    worker1 = cluster.nodes[1]["instance_id"]
    real = json.loads(saved_keys)[worker1]
    fake = _other_key(cluster.key.parent)
    both = (known_hosts.fingerprint(fake), known_hosts.fingerprint(real))
    try:
        _replace_instance_key(cluster, worker1, fake)
        with pytest.raises(RemoteError) as caught:
            do_up(str(cluster.spec), yes=True, rt=runtime(), timeout=60)
        assert all(f in caught.value.message for f in both)
        assert "--accept-new-host-key" in caught.value.hint
        assert json.loads(cluster.host_keys.read_text())[worker1] == fake  # not re-recorded
        for selector in ("1", "worker-1"):
            with pytest.raises(RemoteError) as caught:
                do_ssh(cluster.name, selector, rt=runtime())
            assert all(f in caught.value.message for f in both)
        proc = _cli("ssh", cluster.name, "worker-1", "--", "hostname")
        assert proc.returncode == 1 and both[0] in proc.stderr and both[1] in proc.stderr

        results = do_exec(cluster.name, ["hostname"], nodes=["worker-1"],
                          accept_host_keys=["worker-1"], rt=runtime())
        assert [r.stdout.strip() for r in results.values()] == [cluster.hostnames[1]]
        assert json.loads(cluster.host_keys.read_text())[worker1] == real

        _replace_instance_key(cluster, worker1, fake)
        do_up(str(cluster.spec), yes=True, rt=runtime(), timeout=60,
              accept_host_keys=["1"])
        assert json.loads(cluster.host_keys.read_text())[worker1] == real
        _replace_instance_key(cluster, worker1, fake)
        argv = do_ssh(cluster.name, "1", accept_host_keys=["1"], rt=runtime())
        assert argv[-1] == f"ubuntu@{cluster.nodes[1]['ssh_address']}"
        assert json.loads(cluster.host_keys.read_text())[worker1] == real
    finally:
        cluster.known.write_text(saved)
        cluster.host_keys.write_text(saved_keys)


def test_first_contact_checks_the_console_and_refuses_a_lying_one(cluster: Cluster, sandbox):
    """Worker 1 is made new to this machine (its pinned key forgotten) while the sandbox
    makes its instance's console show another key: `up` refuses it, naming the node,
    the instance and both fingerprints, and pins nothing for it. With an honest console
    the next `up` checks the key against it and pins it."""
    saved, saved_keys = cluster.known.read_text(), cluster.host_keys.read_text()
    worker1 = cluster.nodes[1]["instance_id"]
    real = json.loads(saved_keys)[worker1]
    label = f"{cluster.name}-worker-1"
    selector = f"{cluster.name}/1"
    try:
        _forget(cluster, worker1)
        sandbox_console.set_mode(sandbox.dir, selector, sandbox_console.ConsoleMode.LIE)
        with pytest.raises(RemoteError) as caught:
            do_up(str(cluster.spec), yes=True, rt=runtime(), timeout=60)
        message = caught.value.message
        assert f"{label} ({worker1})" in message and "console" in message
        assert known_hosts.fingerprint(real) in message  # what the node presented
        assert sandbox_console.fingerprint(sandbox_console.other_key(worker1)) in message
        assert "may not reach that instance" in (caught.value.hint or "")
        assert worker1 not in json.loads(cluster.host_keys.read_text())
        assert cluster.nodes[1]["ssh_address"] not in cluster.known.read_text()

        sandbox_console.set_mode(sandbox.dir, selector, None)
        events = Collect()
        rt = runtime()
        rt.report = events
        do_up(str(cluster.spec), yes=True, rt=rt, timeout=60)
        assert json.loads(cluster.host_keys.read_text())[worker1] == real
        assert any("1 new host key(s) match" in t for t in events.texts(Kind.INFO))
        assert not [t for t in events.texts(Kind.WARNING) if "first use" in t]
    finally:
        sandbox_console.set_mode(sandbox.dir, selector, None)
        cluster.known.write_text(saved)
        cluster.host_keys.write_text(saved_keys)


def test_an_image_printing_no_keys_is_refused_unless_accepted(cluster: Cluster, sandbox):
    """Worker 2's console prints no keys (as an image with emit_keys_to_console off), and
    its pinned key is forgotten: the `up` CLI pins nothing for it and exits 1, naming
    node, instance, why and `--accept-new-host-key`, and what still runs; with
    `--accept-new-host-key NAME-worker-2` it pins the key the node presents, with one
    warning naming it; the next `up` says nothing of it."""
    saved, saved_keys = cluster.known.read_text(), cluster.host_keys.read_text()
    worker2 = cluster.nodes[2]["instance_id"]
    real = json.loads(saved_keys)[worker2]
    label, selector = f"{cluster.name}-worker-2", f"{cluster.name}/2"
    try:
        _forget(cluster, worker2)
        sandbox_console.set_mode(sandbox.dir, selector, sandbox_console.ConsoleMode.SILENT)
        refused = _cli("up", str(cluster.spec), "--yes")
        assert refused.returncode == 1, refused.stderr
        err = " ".join((refused.stdout + refused.stderr).split())
        assert f"{label} ({worker2}): its console shows no SSH host keys" in err
        assert known_hosts.fingerprint(real) in err
        assert f"--accept-new-host-key {label}" in err
        assert f"still running: 3 instance(s) of cluster {cluster.name}" in err
        assert worker2 not in json.loads(cluster.host_keys.read_text())
        accepted = _cli("up", str(cluster.spec), "--yes", "--accept-new-host-key", label)
        assert accepted.returncode == 0, accepted.stderr
        err = " ".join((accepted.stdout + accepted.stderr).split())
        assert f"{label} ({worker2}): its console shows no SSH host keys" in err
        assert f"pinning its host key {known_hosts.fingerprint(real)} unchecked" in err
        assert err.count("unchecked") == 1
        assert json.loads(cluster.host_keys.read_text())[worker2] == real
        again = _cli("up", str(cluster.spec), "--yes")
        assert again.returncode == 0 and "unchecked" not in again.stdout + again.stderr
    finally:
        sandbox_console.set_mode(sandbox.dir, selector, None)
        cluster.known.write_text(saved)
        cluster.host_keys.write_text(saved_keys)


def _forget(cluster: Cluster, instance_id: str) -> None:
    keys = json.loads(cluster.host_keys.read_text())
    del keys[instance_id]
    cluster.host_keys.write_text(json.dumps(keys))
    address = next(n["ssh_address"] for n in cluster.nodes if n["instance_id"] == instance_id)
    cluster.known.write_text("".join(line + "\n" for line in cluster.known.read_text()
                                     .splitlines() if not line.startswith(address + " ")))


def _other_key(where: Path) -> str:
    return support.public_key(support.ssh_keygen(where / support.unique_name("other")))


def _replace_instance_key(cluster: Cluster, instance_id: str, key: str) -> None:
    keys = json.loads(cluster.host_keys.read_text())
    keys[instance_id] = key
    cluster.host_keys.write_text(json.dumps(keys))


def _replace_key(known: Path, address: str, key: str) -> None:
    lines = [f"{address} {key}" if line.split(" ", 1)[0] == address else line
             for line in known.read_text().splitlines()]
    known.write_text("\n".join(lines) + "\n")
