"""What a process on a sandbox master reads of its instance metadata, as the login user
or as the recovery controller's user (issue 39: the controller's role readable by the
controller only). The request goes to the metadata's address as the node knows it (the
sandbox's endpoint, where the node's fence is applied: sandbox/netfilter.py), with
IMDSv2's token, by curl on the node."""

from __future__ import annotations

import shlex

from clusterkit.cluster.access.remote_ops import do_exec
from clusterkit.cluster.jobs import controller
from clusterkit_sandbox import imds
from tests.integration.conftest import runtime

PATHS = (imds.INSTANCE_ID_PATH, imds.IDENTITY_PATH, "/latest/meta-data/spot/instance-action",
         imds.ROLE_PATH)


def read(endpoint: str, cluster: str, master: str, *,
         as_controller: bool = False) -> tuple[dict[str, int], str]:
    """(path -> HTTP status of each of PATHS, the role's name as the credentials' path
    lists it, or "" when refused) on ``cluster``'s master ``master``."""
    base = imds.instance_url(endpoint, master)
    script = (f'u={shlex.quote(base)}; t=$(curl -s -X PUT -H '
              f'"X-aws-ec2-metadata-token-ttl-seconds: 60" "$u/latest/api/token"); '
              f'for p in {" ".join(PATHS)}; do curl -s -o /dev/null -w "%{{http_code}} " '
              f'-H "X-aws-ec2-metadata-token: $t" "$u$p"; done; echo; '
              f'curl -sf -H "X-aws-ec2-metadata-token: $t" "$u{imds.ROLE_PATH}" || true')
    if as_controller:
        script = f"cd / && sudo -n {controller.as_user(controller.USER)} sh -c {shlex.quote(script)}"
    [got] = do_exec(cluster, [script], nodes=["master"], rt=runtime()).values()
    lines = got.stdout.splitlines()
    codes = dict(zip(PATHS, map(int, lines[0].split()), strict=True))
    return codes, (lines[1].strip() if len(lines) > 1 else "")


def rules(cluster: str) -> list[str]:
    """The master's nat OUTPUT rules (its iptables: the sandbox's shim)."""
    [got] = do_exec(cluster, ["sudo -n iptables -w -t nat -S OUTPUT"], nodes=["master"],
                    rt=runtime()).values()
    return got.stdout.splitlines()


def check_fenced(endpoint: str, cluster: str, master: str) -> str:
    """While the controller runs (issue 39): the master's login user reads its instance
    id, identity and spot notice path (404 from the metadata itself: no notice, not the
    proxy's 403) through the controller's proxy, and is refused the role's credentials;
    the controller's user reads them. The controller's role's name."""
    [rule] = rules(cluster)
    assert "--uid-owner 0 -j DNAT" in rule and "169.254.169.254/32 --dport 80" in rule, rule
    codes, role = read(endpoint, cluster, master)
    assert list(codes.values()) == [200, 200, 404, 403] and role == "", codes
    codes, role = read(endpoint, cluster, master, as_controller=True)
    assert list(codes.values()) == [200, 200, 404, 200] and role, codes
    return role


def check_unfenced(endpoint: str, cluster: str, master: str, role: str,
                   said: str) -> None:
    """After the controller's exit: the rule is gone, and the login user reads the
    node role's credentials again (not the controller's)."""
    assert "took the metadata fence down" in said, said
    assert rules(cluster) == []
    codes, now = read(endpoint, cluster, master)
    assert list(codes.values()) == [200, 200, 404, 200] and now and now != role, (codes, now)
