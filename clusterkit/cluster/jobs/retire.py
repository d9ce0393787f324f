"""The recovery controller's end, wherever it comes from (``controller.py`` starts it).

- ``retire``: run by the controller itself as it exits (the job ended, it gave up, or a
  TERM): its SSH key comes off every running node's ``authorized_keys`` (the master's
  too), then the master gets the nodes' instance profile back, so nothing on the master
  holds the controller's role once no controller runs. Its launcher (root, on the
  master: ``controller.launch_command``) then takes the metadata fence down, however the
  controller ended.
- ``stop``: `down` (and anyone with the cluster's SSH access) stops a running controller
  before deleting anything: otherwise it would replace the nodes `down` terminates. The
  controller gets TERM (it retires, as above), then KILL if it has not let go of its
  lock in ``STOP_WAIT`` seconds (through sudo: it runs as its own user); either way its
  launcher takes the fence down.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from clusterkit.aws import instances
from clusterkit.cluster.access.remote_ops import cluster_nodes, login_for
from clusterkit.cluster.jobs import controller
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, GroupError
from clusterkit.events import Stage
from clusterkit.kinds import InstanceState
from clusterkit.remote import selection
from clusterkit.remote.address import targets as dial_targets
from clusterkit.remote.channels import Call

STOP_WAIT = 60  # seconds for a controller to retire after TERM before it is killed

# A public key line read from stdin, taken off the login's authorized_keys (the file
# rewritten in place: its owner and mode stay).
UNAUTHORIZE = ('set -e; umask 077; k=$(head -n 1); f="$HOME/.ssh/authorized_keys"; '
               '[ -f "$f" ] || exit 0; grep -vxF "$k" "$f" > "$f.ck-new" || true; '
               'cat "$f.ck-new" > "$f"; rm -f "$f.ck-new"')


def stop_command(wait: int = STOP_WAIT, private: str = controller.PRIVATE) -> str:
    """On the master, as root (sudo: the controller runs as its own user): TERM to the
    controller that holds the lock (its pid from its ready file), waited for until the
    lock is free (a zombie holds none), KILL after ``wait`` s; prints what it did:
    ``none`` (no controller ran), ``stopped`` or ``killed``. Its launcher then takes the
    metadata fence down."""
    ready, lock = controller.READY, controller.LOCK
    script = (f'd={shlex.quote(private)}; [ -e "$d/{lock}" ] && ! flock -n "$d/{lock}" true || '
              f'{{ echo none; exit 0; }}; '
              f'pid=$(sed -n \'s/.*"pid": *\\([0-9][0-9]*\\).*/\\1/p\' "$d/{ready}" 2>/dev/null); '
              f'[ -z "$pid" ] || kill -TERM "$pid" 2>/dev/null || true; '
              f'for _ in $(seq {wait * 2}); do flock -n "$d/{lock}" true && '
              f'{{ echo stopped; exit 0; }}; sleep 0.5; done; '
              f'[ -z "$pid" ] || kill -KILL "$pid" 2>/dev/null || true; echo killed')
    return f"sudo -n sh -c {shlex.quote(script)}"


def stop(rt: Runtime, cluster: str, region: str, master_id: str) -> str:
    """Stop the controller on ``cluster``'s master (``master_id``, which wears the
    controller's instance profile); what the master said (``stop_command``), or why it
    could not be reached (then the master's termination ends the controller)."""
    rt.started(Stage.DOWN, f"stopping the recovery controller on the master {master_id} "
               "(it would replace the nodes being deleted)")
    try:
        jc = running_nodes(rt, cluster, region)
        said = jc.run([jc.master], {jc.master.hop.label: Call(stop_command())},
                      timeout=STOP_WAIT + 30)[jc.master.hop.label].stdout.strip()
    except (ClusterkitError, GroupError, IndexError) as exc:  # IndexError: no node runs
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        rt.warn(f"could not reach the master to stop its recovery controller: {first}; "
                "terminating the master ends it", stage=Stage.DOWN)
        return "unreachable"
    word = said.splitlines()[-1] if said else "none"
    rt.done(Stage.DOWN, {"none": "no recovery controller was running on the master",
                         "stopped": "the recovery controller on the master stopped",
                         "killed": f"the recovery controller on the master was killed "
                                   f"(it did not stop within {STOP_WAIT} s)"}.get(word, word))
    return word


def running_nodes(rt: Runtime, target: str, region: str) -> JobCluster:
    """The cluster's running nodes, master first (a node the job lost may be gone or
    stopped: the others are still reached)."""
    login, regions = login_for(target, region)
    found = cluster_nodes(rt, login.cluster, regions)
    nodes = [n for n in selection.ordered(found) if n.state == InstanceState.RUNNING]
    return JobCluster(login.cluster, None, login, nodes, dial_targets(found, nodes))


def retire(rt: Runtime, values: dict[str, Any], directory: Path) -> None:
    """The controller's last act (see the module's docstring); each half said, a
    failure of one warned and the other still done."""
    public = (directory / f"{controller.KEY}.pub").read_text().strip()
    try:
        jc = running_nodes(rt, str(directory / controller.SPEC_COPY), values["region"])
        jc.run(jc.targets, {t.hop.label: Call(UNAUTHORIZE, public.encode() + b"\n")
                            for t in jc.targets}, timeout=60)
        rt.info(f"took the controller's key off {len(jc.targets)} node(s)", stage=Stage.TRAIN)
    except (ClusterkitError, GroupError, OSError) as exc:
        rt.warn(f"the controller's key may still be authorized on a node: {exc}",
                stage=Stage.TRAIN)
    master, profile = values.get("master_instance_id"), values.get("node_profile")
    if not (master and profile):
        rt.warn("no node profile to give the master back (settings of an older clusterkit)",
                stage=Stage.TRAIN)
        return
    try:
        instances.set_instance_profile(rt.session, values["region"], master, profile)
        rt.info(f"gave the master {master} its node profile back", stage=Stage.TRAIN)
    except ClusterkitError as exc:
        rt.warn(f"the master {master} still wears the controller's profile: {exc}",
                stage=Stage.TRAIN)
