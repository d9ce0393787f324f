"""Sandbox nodes get a clean environment: nothing of the daemon's (or its caller's)
environment, such as AWS credentials or the SSH agent socket, is readable in a node.

Real daemon, real sshd nodes: the module's own ``sandbox`` fixture (overriding the
session one, so ``sandbox_cluster`` launches into it) starts the daemon with marker
variables set, then every process of a node is read from ``/proc/PID/environ``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterkit import sandboxmode
from clusterkit_sandbox import node as nodes
from clusterkit_sandbox.control import do_start, do_stop
from tests.conftest import REGION, SandboxCluster, SandboxHandle

pytestmark = [pytest.mark.sandbox, pytest.mark.root]

SECRETS = {"AWS_SECRET_ACCESS_KEY": "leak-marker-123", "SSH_AUTH_SOCK": "/tmp/leak-marker"}
OTHER = {"CLUSTERKIT_TEST_LEAK": "leak-marker-456"}  # any variable, not only secrets


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    where = tmp_path_factory.mktemp("sandbox-env")
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {**SECRETS, **OTHER}.items():
            mp.setenv(name, value)
        status = do_start(where)
    try:
        env = sandboxmode.sandbox_env(str(where))
        env["AWS_DEFAULT_REGION"] = REGION
        yield SandboxHandle(where, status["endpoint"], env)
    finally:
        do_stop(where)


def environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return {}  # exited meanwhile
    pairs = (item.split("=", 1) for item in raw.decode(errors="replace").split("\0") if item)
    return {p[0]: p[1] if len(p) > 1 else "" for p in pairs}


def memory_holds(pid: int, needle: bytes) -> bool:
    """Whether the process's heap or stack holds ``needle``: sshd overwrites its environ
    area with its process title but keeps a copy of its environment on the heap, which a
    node's root can read through /proc/PID/mem."""
    try:
        with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
            for line in maps:
                fields = line.split()
                if len(fields) < 6 or fields[5] not in ("[heap]", "[stack]"):
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                mem.seek(start)
                if needle in mem.read(end - start):
                    return True
    except (FileNotFoundError, ProcessLookupError):
        pass  # exited meanwhile
    return False


def node_processes(cluster: SandboxCluster, iid: str, at_least: int) -> list[int]:
    """sshd and everything in the node's mount namespace, once ``at_least`` are there."""
    deadline = time.monotonic() + 10
    while True:
        record = cluster.sandbox.nodes()[iid]
        pids = sorted({record["pid"], *nodes.pids_in_ns(record["mntns"])})
        if len(pids) >= at_least or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def test_no_node_process_holds_the_daemons_variables(sandbox_cluster: SandboxCluster) -> None:
    node = sandbox_cluster.launch(1)[0]
    sandbox_cluster.run(node, "setsid sleep 120 </dev/null >/dev/null 2>&1 &")
    pids = node_processes(sandbox_cluster, node.instance_id, at_least=2)
    assert len(pids) >= 2, pids  # the sshd and the job left running in the node
    for pid in pids:
        env = environ(pid)
        leaked = {k: v for k, v in env.items() if "leak-marker" in v or k in OTHER}
        assert not leaked, (pid, Path(f"/proc/{pid}/cmdline").read_bytes(), leaked)
        assert not memory_holds(pid, b"leak-marker"), (pid, Path(f"/proc/{pid}/cmdline"))


def test_a_node_cannot_read_the_secrets_anywhere_in_proc(
        sandbox_cluster: SandboxCluster) -> None:
    """From inside the node, as its root user: no /proc/*/environ it can read (its own
    processes: the daemon's are in no node's /proc any more) holds the secrets."""
    node = sandbox_cluster.launch(1)[0]
    # the needles go to grep in a file written by printf from octal escapes: sudo puts
    # the command it runs in SUDO_COMMAND, so a needle on grep's command line would be
    # found in the environ of grep itself
    escaped = "\\n".join("".join(f"\\{ord(c):03o}" for c in v) for v in SECRETS.values())
    out = sandbox_cluster.run(node, f"printf '{escaped}\\n' > /tmp/needles && "
                                    "sudo -n grep -l -a -F -f /tmp/needles "
                                    "/proc/[0-9]*/environ 2>/dev/null; echo scanned",
                                    check=True)
    assert out.stdout.strip().splitlines() == ["scanned"], out.stdout
