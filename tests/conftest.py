"""Shared fixtures: the sandbox (moto server + real sshd nodes on loopback).

``sandbox`` (session): one running sandbox in a temp state dir -> SandboxHandle.
``sandbox_env`` (function): the same, with its variables set in os.environ
    (AWS_ENDPOINT_URL, the sandbox's credentials file, region, CLUSTERKIT_SANDBOX=1,
    CLUSTERKIT_ADDRESS_MAP), undone after the test.
``sandbox_cluster`` (function, root only): a key pair in the emulator and helpers
    to launch tagged instances and reach their sshd -> SandboxCluster; every
    instance it launched is terminated afterwards, and its sshd is gone.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clusterkit import sandboxmode
from clusterkit_sandbox import credentials
from clusterkit_sandbox.control import do_start, do_stop
from clusterkit_sandbox.state import NODES_FILE, read_json
from tests import netsafety, scheduling, support

REGION = "us-east-1"
AMI = "ami-12c6146b"  # one of moto's built-in images
CLUSTER_TAG = "clusterkit:cluster"


def pytest_configure(config: pytest.Config) -> None:
    netsafety.install()
    share_botocore_models()
    share_client_classes()


def share_botocore_models() -> None:
    """Every botocore session of a test process reads the service models through one
    loader. The tests make a session per `up`, `down` or check (as each CLI process
    does), and each new session parsed every model it used again: about 70 ms of CPU a
    client, half the time of the provisioning tests. The models are read-only data, so
    sharing them changes nothing a test sees; only the default search paths are
    shared."""
    import botocore.loaders
    import botocore.session

    made: dict[tuple, botocore.loaders.Loader] = {}
    create = botocore.loaders.create_loader

    def shared_loader(search_path_string: str | None = None) -> botocore.loaders.Loader:
        key = (search_path_string,)
        if key not in made:
            made[key] = create(search_path_string)
        return made[key]

    botocore.session.create_loader = shared_loader


def share_client_classes() -> None:
    """Every client of one service and API version in a test process is an instance of
    one class. botocore builds a client's class anew for each client (a method per
    operation: half of the cost of a client, and the tests make thousands, as every CLI
    process makes its own). The class holds no session state: its methods only name
    their operation, and the per-client events (clusterkit's guards, a test's fault
    hook) live on the instance. The class event is still emitted once per class, so a
    handler that adds methods (boto3 does for S3) adds them to the shared class."""
    import botocore.client

    made: dict[tuple, type] = {}
    create = botocore.client.ClientCreator._create_client_class

    def shared_class(self, service_name, service_model):
        key = (service_name, service_model.api_version)
        if key not in made:
            made[key] = create(self, service_name, service_model)
        return made[key]

    botocore.client.ClientCreator._create_client_class = shared_class


# Fixtures that start a sandbox daemon: one per pytest process that uses it, each on a
# loopback block of its own (127.B.0.N:22), so processes run them side by side.
SANDBOX_FIXTURES = frozenset({"sandbox"})
# how long a test waits for a launched node to boot: a node builds its own root (its
# /etc, /dev, accounts) before its sshd starts, seconds when all four test processes
# keep both cores busy
NODE_BOOT_WAIT = 60.0



def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`sandbox` is put on every test that uses the sandbox fixture, however indirectly,
    so `-m sandbox` / `-m "not sandbox"` split the suite exactly. With `--dist loadgroup`
    the longest work units come first (tests/scheduling.py), on top of pytest-randomly's
    shuffle: xdist hands units out in collection order."""
    for item in items:
        if SANDBOX_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.sandbox)
    if config.getvalue("dist") == "loadgroup":
        by_id = {item.nodeid: item for item in items}
        order = scheduling.longest_first(by_id, work_unit(Path(str(config.rootpath))),
                                         scheduling.load())
        items[:] = [by_id[nodeid] for nodeid in order]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With `--dist loadgroup` (scripts/test.sh): the tests of a module that defines a
    module-scoped fixture (a sandbox cluster, a packed dataset) go to one process, which
    makes the fixture once; plain load scheduling made it in every process that drew one
    of the module's tests. Every other test is scheduled alone, as `load` does. (xdist's
    own loadgroup marks tests by rewriting their node ids, which pytest 9 no longer
    allows, so the grouping is done here, where the scheduler sees the ids.)"""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    unit_of = work_unit(Path(str(config.rootpath)))

    class ModuleFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False  # the collection's order: longest first
    return ModuleFixtureScheduling(config, log)


def work_unit(root: Path) -> Callable[[str], str]:
    """A test's unit of scheduling: its module where the module defines a module-scoped
    fixture, else the test itself."""
    grouped = modules_with_module_fixtures(root)

    def unit_of(nodeid: str) -> str:
        module = nodeid.split("::", 1)[0]
        return module if module in grouped else nodeid

    return unit_of


# a module that takes another's module-scoped fixture as its own (`cluster = test_train.cluster`)
_BORROWED_FIXTURE = re.compile(r"^\w+ = test_\w+\.\w+\b", re.M)


def modules_with_module_fixtures(root: Path) -> frozenset[str]:
    """Test modules (paths relative to ``root``, as in node ids) that define a fixture
    with ``scope="module"``, or borrow one from another test module."""
    return frozenset(str(path.relative_to(root)) for path in (root / "tests").rglob("test_*.py")
                     if 'scope="module"' in (text := path.read_text())
                     or _BORROWED_FIXTURE.search(text))


def pytest_runtest_setup(item: pytest.Item) -> None:
    """The `root`, `mxnet` and `torch` markers act: an unmet one skips the test, or
    fails it under CI (tests/support.py)."""
    if item.get_closest_marker("root"):
        support.require_root(item.nodeid)
    if item.get_closest_marker("mxnet"):
        support.require_module("mxnet")
    if item.get_closest_marker("torch"):
        support.torch_python()


@dataclass
class SandboxHandle:
    dir: Path
    endpoint: str
    env: dict[str, str]  # everything a process needs to use this sandbox
    region: str = REGION

    def client(self, service: str, region: str | None = None) -> Any:
        """A plain boto3 client on the sandbox endpoint (test-side setup/inspection),
        signing with the sandbox's credentials of this start."""
        return credentials.client(self.dir, service, self.endpoint, region or self.region)

    def nodes(self) -> dict[str, dict[str, Any]]:
        """instance id -> node record (address, hostname, state, host_key, ...)."""
        return read_json(self.dir / NODES_FILE, {}) or {}

    def wait_nodes(self, ids: list[str], states: tuple[str, ...] = ("ready",),
                   timeout: float = NODE_BOOT_WAIT) -> list[dict[str, Any]]:
        deadline = time.monotonic() + timeout
        while True:
            nodes = self.nodes()
            if all(nodes.get(i, {}).get("state") in states for i in ids):
                return [nodes[i] for i in ids]
            if time.monotonic() > deadline:
                got = {i: nodes.get(i, {}).get("state") for i in ids}
                raise TimeoutError(f"nodes not {states} after {timeout}s: {got}")
            time.sleep(0.05)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    where = tmp_path_factory.mktemp("sandbox")
    status = do_start(where)
    try:
        env = sandboxmode.sandbox_env(str(where))
        env["AWS_DEFAULT_REGION"] = REGION
        yield SandboxHandle(where, status["endpoint"], env)
    finally:
        do_stop(where)


@pytest.fixture
def sandbox_env(sandbox: SandboxHandle, monkeypatch: pytest.MonkeyPatch) -> SandboxHandle:
    support.forget_default_session()
    for name in support.FOREIGN_AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in sandbox.env.items():
        monkeypatch.setenv(name, value)
    return sandbox


@dataclass
class SandboxNode:
    instance_id: str
    address: str
    hostname: str
    host_key: str  # "ssh-ed25519 AAAA..." of the node's sshd


@dataclass
class SandboxCluster:
    sandbox: SandboxHandle
    name: str
    key_name: str
    key_path: Path  # private key (PEM, 0600) of the EC2 key pair
    known_hosts: Path  # host keys of every node launched so far
    ec2: Any
    launched: list[str] = field(default_factory=list)

    def launch(self, count: int = 1, instance_type: str = "t3.micro", wait: bool = True,
               **kwargs: Any) -> list[SandboxNode]:
        """RunInstances with the cluster tag and key pair; wait for their sshd."""
        tags = [{"Key": CLUSTER_TAG, "Value": self.name}]
        resp = self.ec2.run_instances(
            ImageId=AMI, MinCount=count, MaxCount=count, InstanceType=instance_type,
            KeyName=self.key_name,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}], **kwargs)
        ids = [i["InstanceId"] for i in resp["Instances"]]
        self.launched += ids
        return self.wait_ssh(ids) if wait else []

    def wait_ssh(self, ids: list[str], timeout: float = NODE_BOOT_WAIT) -> list[SandboxNode]:
        records = self.sandbox.wait_nodes(ids, timeout=timeout)
        found = [SandboxNode(r["instance_id"], r["address"], r["hostname"], r["host_key"])
                 for r in records]
        with self.known_hosts.open("a") as handle:
            for node in found:
                handle.write(f"{node.address} {node.host_key}\n")
        return found

    def ssh_argv(self, node: SandboxNode, command: str, user: str = "ubuntu",
                 *extra: str) -> list[str]:
        """Real OpenSSH client argv, host key checked against known_hosts."""
        return ["ssh", "-i", str(self.key_path), "-o", "BatchMode=yes",
                "-o", f"UserKnownHostsFile={self.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "IdentitiesOnly=yes",
                *extra, f"{user}@{node.address}", command]

    def run(self, node: SandboxNode, command: str, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(self.ssh_argv(node, command), capture_output=True, text=True,
                              check=check, timeout=timeout)

    def terminate(self, ids: list[str] | None = None) -> None:
        ids = ids or list(self.launched)
        if not ids:
            return
        self.ec2.terminate_instances(InstanceIds=ids)
        deadline = time.monotonic() + 15
        while any(self.sandbox.nodes().get(i, {}).get("state") in ("ready", "booting")
                  for i in ids):
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes still up 15 s after terminate: {ids}")
            time.sleep(0.05)


@pytest.fixture
def sandbox_cluster(sandbox: SandboxHandle, tmp_path: Path) -> Iterator[SandboxCluster]:
    support.require_root("sandbox_cluster")
    ec2 = sandbox.client("ec2")
    name = support.unique_name("t")
    key = ec2.create_key_pair(KeyName=name)
    key_path = tmp_path / f"{name}.pem"
    key_path.write_text(key["KeyMaterial"])
    key_path.chmod(0o600)
    cluster = SandboxCluster(sandbox, name, name, key_path, tmp_path / "known_hosts", ec2)
    cluster.known_hosts.touch()
    try:
        yield cluster
    finally:
        try:
            cluster.terminate()
        finally:
            ec2.delete_key_pair(KeyName=name)
