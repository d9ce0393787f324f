"""The cluster in the user's own `ssh`, end to end in the sandbox: `up` of a 3-node
cluster writes its host entries and says the one Include line ~/.ssh/config needs;
the system `ssh`, given a config holding exactly that line (and the test's ssh-agent,
the only way in), reaches the master as `NAME` and a worker as `NAME-worker-2` through
the master, checking the pinned host keys; `down` removes the entries."""

from __future__ import annotations

import subprocess
from pathlib import Path

from clusterkit.plan.nodes import node_name
from clusterkit.remote import known_hosts, sshhosts
from tests import support
from tests.e2e.clusters import running, sandbox_spec, user_session


def ssh(config: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["ssh", "-F", str(config), "-o", "BatchMode=yes", *args],
                          capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)


def test_ssh_name_and_name_worker_reach_the_nodes_and_down_removes_them(sandbox,
                                                                         tmp_path: Path):
    support.require_root("the sandbox's SSH nodes")
    name = support.unique_name("sh")
    spec = tmp_path / f"{name}.yaml"
    spec.write_text(sandbox_spec(name, count=3, instance_type="c5.large"))
    config = tmp_path / "user_ssh_config"
    with user_session(sandbox, tmp_path):
        with running(spec, name) as up:
            assert up.ssh_hosts == sshhosts.path(name) and up.ssh_hosts.is_file()
            assert up.ssh_include == sshhosts.include_line()  # said: HOME has no config
            config.write_text(f"{up.ssh_include}\n")
            master = ssh(config, name, "hostname")
            assert master.returncode == 0, master.stderr
            assert master.stdout.strip() == node_name(name, 0)
            worker = ssh(config, f"{name}-worker-2", "hostname")
            assert worker.returncode == 0, worker.stderr
            assert worker.stdout.strip() == node_name(name, 2)
            shown = ssh(config, "-G", f"{name}-worker-2").stdout
            assert f"proxyjump {name}" in shown and "forwardagent yes" in shown
            assert "stricthostkeychecking true" in shown
            # through the master: with the master's key in known_hosts wrong, the worker
            # is out of reach too (the jump checks the master against the same file)
            known = known_hosts.known_hosts_path(name)
            saved = known.read_text()
            try:
                address = up.nodes[0].ssh_address
                other = support.public_key(support.ssh_keygen(tmp_path / "other"))
                known.write_text("".join(f"{address} {other}\n" if line.split(" ")[0] ==
                                         address else line + "\n"
                                         for line in saved.splitlines()))
                cut = ssh(config, f"{name}-worker-2", "hostname")
                assert cut.returncode == 255, cut.stderr
                assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in cut.stderr
            finally:
                known.write_text(saved)
        assert not sshhosts.path(name).exists()
    gone = ssh(config, f"{name}-worker-2", "hostname")
    assert gone.returncode == 255  # the name means nothing any more
