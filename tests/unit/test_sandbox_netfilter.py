"""sandbox/netfilter.py: a node's iptables shim keeps the nat OUTPUT rules (the owner's
name as its uid; -D takes one copy off; anything else not emulated), and the sandbox's
metadata sends a caller the rule catches to the rule's target (a real HTTP server here)
while every other caller gets the metadata itself. The calling socket's owner is given
here (the daemon finds it in /proc: ``peers``, tested with real nodes)."""

from __future__ import annotations

import http.server
import os
import subprocess
import threading
from pathlib import Path

import pytest
from werkzeug.test import Client

from clusterkit.node import imdsfence, interruption
from clusterkit.node.imdsfence import Action
from clusterkit_sandbox import imds, netfilter
from clusterkit_sandbox.state import RUN_DIR

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the shim acts as root only")


def _shim(tmp_path: Path, argv: list[str]) -> subprocess.CompletedProcess:
    rules = netfilter.rules_file(tmp_path, "i-1")
    script = tmp_path / "iptables"
    script.write_text(netfilter.IPTABLES_SHIM.replace(netfilter.RULES_IN_NODE, str(rules)))
    return subprocess.run(["sh", str(script), *argv[1:]], capture_output=True, text=True)


def test_the_shim_keeps_the_rules_with_uids(tmp_path):
    rule = imdsfence.rule_argv(Action.ADD, "127.0.0.1", 9000, user="daemon")
    for _ in range(2):
        assert _shim(tmp_path, rule).returncode == 0
    kept = netfilter.rules_file(tmp_path, "i-1").read_text().splitlines()
    assert kept == [" ".join(rule[6:]).replace("--uid-owner daemon", "--uid-owner 1")] * 2
    check = imdsfence.rule_argv(Action.CHECK, "127.0.0.1", 9000, user="daemon")
    delete = imdsfence.rule_argv(Action.DELETE, "127.0.0.1", 9000, user="daemon")
    assert _shim(tmp_path, check).returncode == 0
    assert _shim(tmp_path, delete).returncode == 0  # one copy off, one left
    assert _shim(tmp_path, check).returncode == 0
    assert _shim(tmp_path, delete).returncode == 0
    assert _shim(tmp_path, check).returncode == 1
    gone = _shim(tmp_path, delete)
    assert gone.returncode == 1 and "Bad rule" in gone.stderr
    for other in (["iptables", "-A", "INPUT", "-j", "DROP"],
                  ["iptables", "-t", "filter", "-A", "OUTPUT", "-j", "DROP"],
                  ["iptables", "-t", "nat", "-F", "OUTPUT"]):
        said = _shim(tmp_path, other)
        assert said.returncode == 1 and "not emulated" in said.stderr, said
    unknown = imdsfence.rule_argv(Action.ADD, "127.0.0.1", 9000, user="no-such-user-ck")
    assert _shim(tmp_path, unknown).returncode == 2


@pytest.mark.parametrize("uid, caught", [(1000, True), (1, False), (0, False)])
def test_a_rule_catches_every_uid_it_does_not_except(uid, caught):
    rule = " ".join(imdsfence.rule_argv(Action.ADD, "127.0.0.5", 9000)[6:]).replace(
        "clusterkit-ctl", "1")
    assert netfilter.target_of(rule, uid) == (("127.0.0.5", 9000) if caught else None)


@pytest.mark.parametrize("rule", [
    "-p udp -d 169.254.169.254/32 --dport 80 -j DNAT --to-destination 127.0.0.5:9000",
    "-p tcp -d 10.0.0.1/32 --dport 80 -j DNAT --to-destination 127.0.0.5:9000",
    "-p tcp -d 169.254.169.254/32 --dport 443 -j DNAT --to-destination 127.0.0.5:9000",
    "-p tcp -d 169.254.169.254/32 --dport 80 -j ACCEPT",
    "-p tcp -d 169.254.169.254/32 --dport 80 -m owner --uid-owner 7 -j DNAT "
    "--to-destination 127.0.0.5:9000",
])
def test_a_rule_for_something_else_sends_nothing(rule):
    assert netfilter.target_of(rule, 1000) is None


class _Proxy(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802
        body = f"proxy {self.path} {self.headers.get('X-aws-ec2-metadata-token')}".encode()
        self.send_response(403 if "security-credentials" in self.path else 200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_the_metadata_sends_a_caught_caller_to_the_proxy(tmp_path):
    (tmp_path / RUN_DIR).mkdir()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    rules = netfilter.rules_file(tmp_path, "i-1")
    rules.parent.mkdir(parents=True)
    rules.write_text(" ".join(imdsfence.rule_argv(Action.ADD, "127.0.0.1", port)[6:])
                     .replace("clusterkit-ctl", "999") + "\n")
    caller = {"uid": 1000}

    def fence(environ, iid):
        return netfilter.redirect(netfilter.rules(tmp_path, iid), caller["uid"])

    client = Client(imds.Imds(lambda e, s: [], tmp_path, fence=fence))
    base = f"{imds.PREFIX}i-1"
    head = {"X-aws-ec2-metadata-token": "t0"}
    try:
        got = client.get(base + imds.INSTANCE_ID_PATH, headers=head)
        assert (got.status_code, got.get_data(as_text=True)) == (
            200, f"proxy {imds.INSTANCE_ID_PATH} t0")
        assert client.get(base + imds.ROLE_PATH, headers=head).status_code == 403
        caller["uid"] = 999  # the controller's own: the metadata itself (no token: 401)
        assert client.get(base + imds.INSTANCE_ID_PATH, headers=head).status_code == 401
        caller["uid"] = 1000
        rules.write_text("")  # the rule gone: the metadata itself
        assert client.get(base + imds.INSTANCE_ID_PATH, headers=head).status_code == 401
        reply = client.put(base + interruption.TOKEN_PATH,
                           headers={"X-aws-ec2-metadata-token-ttl-seconds": "60"})
        assert reply.status_code == 200
    finally:
        server.shutdown()
        server.server_close()
    rules.write_text(" ".join(imdsfence.rule_argv(Action.ADD, "127.0.0.1", port)[6:]) + "\n")
    refused = client.get(base + imds.INSTANCE_ID_PATH, headers=head)  # nothing listens
    assert refused.status_code == 502
