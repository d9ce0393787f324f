"""The nodes `up` last saw (cluster/access/nodecache.py) and when `train` may trust them
(jobs.cached_nodes_hold, jobs.open_job_cluster(cached=True)): kept only whole and running,
read back equal, dropped on change, and checked against the master's hosts block."""

from __future__ import annotations

import json

import pytest

from clusterkit import statedir
from clusterkit.cluster.access import nodecache
from clusterkit.cluster.jobs import nodejobs as jobs
from clusterkit.cluster.runtime import Runtime
from clusterkit.kinds import Market
from clusterkit.plan.nodes import Node
from clusterkit.remote import known_hosts

NAME = "kept1"


def _node(index: int, state: str = "running") -> Node:
    return Node(f"i-{index:017x}", index, state, "c5.large", "us-east-1a", Market.SPOT,
                "us-east-1", public_ip=f"127.0.0.{10 + index}",
                private_ip=f"127.0.0.{20 + index}", tags={"clusterkit:cluster": NAME},
                volume_ids=(f"vol-{index:017x}",), price=0.1)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(statedir.HOME_ENV, str(tmp_path))
    monkeypatch.delenv("CLUSTERKIT_ADDRESS_MAP", raising=False)
    return tmp_path


def test_kept_nodes_read_back_equal(home):
    nodes = [_node(0), _node(1)]
    assert nodecache.save(NAME, nodes)
    assert nodecache.load(NAME) == nodes
    data = json.loads((home / "clusters" / NAME / "nodes.json").read_text())
    assert data["version"] == 1 and data["cluster"] == NAME


@pytest.mark.parametrize("nodes", [[], [_node(0), _node(1, "stopped")],
                                   [_node(0), Node("i-1", None, "running", "c5.large", "a",
                                                   Market.SPOT, "us-east-1")]])
def test_a_partial_or_not_running_list_is_never_kept(home, nodes):
    nodecache.save(NAME, [_node(0), _node(1)])
    assert not nodecache.save(NAME, nodes)
    assert nodecache.load(NAME) is None  # and the older list is dropped too


@pytest.mark.parametrize("text", ["", "{", '{"version": 2, "cluster": "kept1", "nodes": []}',
                                  '{"version": 1, "cluster": "other", "nodes": []}',
                                  '{"version": 1, "cluster": "kept1", "nodes": [{"x": 1}]}'])
def test_an_unusable_file_reads_as_nothing_kept(home, text):
    (home / "clusters" / NAME).mkdir(parents=True)
    (home / "clusters" / NAME / "nodes.json").write_text(text)
    assert nodecache.load(NAME) is None


def test_forget_drops_the_list_and_refuses_a_bad_name(home):
    nodecache.save(NAME, [_node(0)])
    nodecache.forget(NAME)
    assert nodecache.load(NAME) is None
    nodecache.forget(NAME)  # nothing kept: no error
    with pytest.raises(Exception, match="cluster name"):
        nodecache.forget("../x")


def _kept(home, nodes) -> jobs.JobCluster | None:
    nodecache.save(NAME, nodes)
    known_hosts.record(NAME, {"127.0.0.10": "ssh-ed25519 AAAA"}, 22)
    return jobs.open_job_cluster(Runtime(session=None), NAME, "us-east-1", cached=True)


def _hosts(*lines: str) -> str:
    return ("127.0.0.1 localhost\n# BEGIN clusterkit (managed by clusterkit hosts.sh)\n"
            + "".join(f"{line}\n" for line in lines) + "# END clusterkit\n")


MASTER = f"127.0.0.20 deeplearning-master master master-0 {NAME}-master-0"
WORKER = f"127.0.0.21 deeplearning-worker1 worker-1 {NAME}-worker-1"


def test_kept_nodes_open_without_aws_and_hold_only_when_the_hosts_block_names_them(home):
    jc = _kept(home, [_node(1), _node(0)])  # Runtime without a session: no AWS call
    assert jc is not None and jc.cached
    assert [n.index for n in jc.nodes] == [0, 1]
    assert jc.login.connect_timeout == jobs.CACHED_CONNECT_TIMEOUT
    assert jobs.cached_nodes_hold(jc, _hosts(MASTER, WORKER))
    assert not jobs.cached_nodes_hold(jc, _hosts(MASTER))  # a node more than the master knows
    assert not jobs.cached_nodes_hold(jc, _hosts(MASTER, WORKER, WORKER.replace("21", "22")
                                                 .replace("1 ", "2 ")))  # one fewer
    assert not jobs.cached_nodes_hold(jc, _hosts(MASTER, WORKER.replace(".21", ".99")))
    assert not jobs.cached_nodes_hold(jc, "127.0.0.1 localhost\n")  # no block at all


def test_nothing_kept_without_known_hosts_or_a_master(home):
    login = jobs.login_for(NAME, "us-east-1")[0]
    nodecache.save(NAME, [_node(0)])
    assert jobs._kept_cluster(login, None) is None  # no known_hosts: never a blind dial
    known_hosts.record(NAME, {"127.0.0.10": "ssh-ed25519 AAAA"}, 22)
    assert jobs._kept_cluster(login, None) is not None
    nodecache.save(NAME, [_node(1), _node(2)])
    assert jobs._kept_cluster(login, None) is None
