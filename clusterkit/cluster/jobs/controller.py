"""The master's recovery controller: `train --detach` with recoveries allowed leaves a
process on the master that follows the job and recovers it as `train` would
(``cluster/jobs/attach.py``) with no client connected (``controller_daemon.py`` is that
process's side).

What the client sets up (``start``), once the job runs:
1. the master will get the stack's controller instance profile (ControllerRole: EC2 calls
   only on resources tagged with this cluster; docs/iam-policy-controller.json), so the
   controller's AWS credentials are that role's, from the master's metadata: none of the
   user's leave this machine;
2. on the master, a system user of the controller's own (``USER``: no login shell, no
   password, no sudo) and its directory ``PRIVATE`` (0700, only that user reads it):
   clusterkit's own package (on AWS with a virtualenv of its dependencies; in the
   sandbox the client's), a copy of the spec and of the cluster's known_hosts, the job's
   settings, its lock, and an SSH key made there (its private half never leaves it);
   the login's ``~/.clusterkit/controller`` keeps the controller's log and public key;
3. that key's public half authorized on every node (on the nodes the controller
   launches, by the launch's cloud-config: ``remote/incluster.py``);
4. the metadata fence (``node/imdsfence.py``): from here on every other user's (not
   root's) connections to the instance metadata go to the controller's proxy, which
   serves all but the role's credentials; only then the master's profile is swapped;
5. the controller started as its user (``setsid``: it outlives the SSH session, under a
   root shell that takes the fence down as it exits), and waited for until it holds its
   lock and follows the job.
While it runs, `train --attach` follows the job without recovering it (``alive``). As it
exits it takes its key off every node and gives the master its node profile back, and
`down` stops it before deleting anything (``retire.py``)."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import re
import shlex
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import clusterkit
from clusterkit import sandboxmode
from clusterkit.aws import instances
from clusterkit.aws import stack as aws_stack
from clusterkit.cluster.jobs.nodejobs import JobCluster
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError, GroupError, UsageError
from clusterkit.events import Stage
from clusterkit.netguard import SANDBOX_ENV
from clusterkit.node import imdsfence
from clusterkit.plan.provision import StackRecord
from clusterkit.plan.stack import stack_name
from clusterkit.remote.address import ssh_address
from clusterkit.remote.archive import tar_bytes
from clusterkit.remote.channels import Call
from clusterkit.remote.incluster import CONTROLLER_KEY_ENV
from clusterkit.statedir import HOME_ENV, cluster_dir

DIR = "$HOME/.clusterkit/controller"  # the login's on the master: the log, the public key
PRIVATE = "/var/lib/clusterkit/controller"  # the controller user's own (0700): all the rest
USER = imdsfence.CONTROLLER_USER  # the controller's system user on the master
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SETTINGS = "controller.json"
SPEC_COPY = "spec.yaml"
KEY = "id_ed25519"
LOG = "controller.log"
READY = "ready"  # the controller's pid and job, once it holds the lock
LOCK = "lock"
# What the controller imports beyond the standard library (tests/unit: test_controller
# checks the CLI's controller command loads nothing else)
DEPENDENCIES = ("boto3", "botocore", "paramiko", "fabric", "PyYAML", "click", "rich")
READY_WAIT = 60  # seconds for the controller to take its lock and answer


def check(workdir_shared: bool | None) -> None:
    """A detached job is recovered only where a replacement finds the code: synced to EFS
    (``workdir_shared`` True) or already on the nodes (None: nothing synced)."""
    if workdir_shared is False:
        raise UsageError("a detached job with recoveries needs its workdir on EFS: a "
                         "replacement node would lack the copy synced to each node",
                         "add storage.efs to the spec (the workdir goes there), run "
                         "`train` attached, or give --max-recoveries 0")


def settings(rt: Runtime, jc: JobCluster, job_id: str, limit: int, region: str,
             node_workdir: str | None) -> dict[str, Any]:
    """What the controller is told: the job, the limit, where the code is, the SSH
    source the stack allows (so the controller's `up` never points the rule at the
    master's own address), and what it gives back as it exits (``retire.py``): the
    master's node profile."""
    described = aws_stack.stack_record(rt.session, region, stack_name(jc.name))
    record = StackRecord.of(region, described)
    return {"cluster": jc.name, "job_id": job_id, "max_recoveries": limit,
            "region": region, "node_workdir": node_workdir,
            "ssh_cidr": (described.get("parameters") or {}).get("SshCidr", ""),
            "profile": record.controller_profile, "node_profile": record.instance_profile,
            "master_instance_id": jc.master.node.instance_id}


def package_files() -> Iterator[tuple[str, bytes, int]]:
    """clusterkit's own package as it runs here (sources and data, no bytecode; a
    checkout's resources/ links to the playbooks and templates are followed)."""
    root = Path(clusterkit.__file__).resolve().parent
    for top, dirs, files in sorted(os.walk(root, followlinks=True)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if not f.endswith(".pyc")):
            path = Path(top) / name
            yield f"lib/clusterkit/{path.relative_to(root)}", path.read_bytes(), 0o600


def archive(spec_text: str, known_hosts: bytes, values: Mapping[str, Any]) -> bytes:
    """Everything the controller's directory receives, as one tar for SSH stdin."""
    hosts = f"home/clusters/{values['cluster']}/known_hosts"
    return tar_bytes([(SETTINGS, json.dumps(dict(values), indent=1).encode(), 0o600),
                      (SPEC_COPY, spec_text.encode(), 0o600), (hosts, known_hosts, 0o600),
                      *package_files()])


def pinned_dependencies() -> list[str]:
    return [f"{name}=={importlib.metadata.version(name)}" for name in DEPENDENCIES]


def user_command(user: str = USER, private: str = PRIVATE) -> str:
    """On the master: the controller's system user, made once (no login shell, no
    password, no sudo; its home in its private directory)."""
    return (f"id -u {user} >/dev/null 2>&1 || sudo -n useradd --system --user-group "
            f"--no-create-home --home-dir {private}/home --shell /usr/sbin/nologin {user}")


def as_user(user: str) -> str:
    """Root's words running what follows as ``user`` (setpriv: it execs, so the
    controller's process is the one its launcher started; no PAM, no password)."""
    return f"setpriv --reuid={user} --regid={user} --init-groups --"


def setup_command(sandbox: bool, private: str = PRIVATE, user: str = USER) -> str:
    """On the master: the controller user's directory (0700) filled from stdin's tar, as
    that user, the key made there once, and on AWS the virtualenv with the pinned
    dependencies; the public line copied to the login's directory and printed."""
    venv = "" if sandbox else (
        f'want={shlex.quote(" ".join(pinned_dependencies()))}; '
        f'[ -x "$p/venv/bin/python" ] || python3 -m venv "$p/venv"; '
        f'[ "$(cat "$p/venv/deps" 2>/dev/null)" = "$want" ] || '
        f'{{ "$p/venv/bin/pip" install -q --disable-pip-version-check $want && '
        f'echo "$want" > "$p/venv/deps"; }}; ')
    mine = (f'set -e; umask 077; p="$1"; rm -rf "$p/lib"; mkdir -p "$p/home"; '
            f'tar -x -C "$p" --no-same-owner; {venv}'
            f'[ -f "$p/{KEY}" ] || ssh-keygen -q -t ed25519 -N "" '
            f'-C "clusterkit-controller@$(hostname)" -f "$p/{KEY}" < /dev/null; '
            f'cat "$p/{KEY}.pub"')
    return (f'set -e; umask 077; d="{DIR}"; p={shlex.quote(private)}; mkdir -p "$d"; '
            f'chmod 700 "$HOME/.clusterkit" "$d"; cd /; '
            f'sudo -n install -d -m 755 "${{p%/*}}"; '
            f'sudo -n install -d -o {user} -g {user} -m 700 "$p"; '
            f'sudo -n {as_user(user)} env -i HOME="$p/home" PATH="{PATH}" '
            f'sh -c {shlex.quote(mine)} sh "$p" > "$d/setup.out"; '
            f'tail -n 1 "$d/setup.out" > "$d/{KEY}.pub"; rm -f "$d/setup.out"; '
            f'cat "$d/{KEY}.pub"')


def fence_command(action: imdsfence.Action, proxy_address: str) -> str:
    """On the master (as root through sudo): the metadata fence's rule added, deleted
    or checked (``imdsfence.rule_argv``: checked values only)."""
    return "sudo -n " + shlex.join(imdsfence.rule_argv(action, proxy_address))


# A public key line read from stdin, added to the login's authorized_keys once.
AUTHORIZE = ('set -e; umask 077; mkdir -p "$HOME/.ssh"; k=$(head -n 1); '
             'touch "$HOME/.ssh/authorized_keys"; '
             'grep -qxF "$k" "$HOME/.ssh/authorized_keys" || '
             'printf "%s\\n" "$k" >> "$HOME/.ssh/authorized_keys"')


def controller_env(sandbox: bool, master_instance_id: str,
                   private: str = PRIVATE) -> dict[str, str]:
    """The controller's whole environment besides HOME and PATH: nothing secret (it is
    on a command line), no credentials (the master's role gives them)."""
    env = {HOME_ENV: f"{private}/home", CONTROLLER_KEY_ENV: f"{private}/{KEY}",
           "LANG": "C.UTF-8", "PYTHONPATH": f"{private}/lib", "PYTHONDONTWRITEBYTECODE": "1"}
    if not sandbox:
        return env
    site = [p for p in dict.fromkeys(sys.path) if p.endswith("-packages")]
    env.update({**sandboxmode.node_env(master_instance_id),
                "PYTHONPATH": os.pathsep.join([f"{private}/lib", *site])})
    return env


def _assignment(name: str, value: str) -> str:
    """``NAME="value"`` for the shell, ``$HOME`` expanded and nothing else."""
    if not re.fullmatch(r"[A-Z_][A-Z0-9_]*", name) or \
            not re.fullmatch(r'[^"`\\$\n]*', value.replace("$HOME", "")):
        raise ValueError(f"cannot pass {name}={value!r} to the controller")
    return f'{name}="{value}"'


def launch_command(env: Mapping[str, str], python: str, unfence: str = "",
                   private: str = PRIVATE, user: str = USER) -> str:
    """Start the controller as its own user in its own session (it outlives this SSH
    session), with nothing of the login's environment; as it exits, however it exits,
    the metadata fence comes down (``unfence``: the rule's DELETE, run as root); its log in
    the login's directory; prints the pid of its session's root (sudo)."""
    words = " ".join(_assignment(name, value) for name, value in env.items())
    down = (f'if {unfence}; then echo "took the metadata fence down"; else echo '
            f'"the metadata fence may still be in place"; fi; ' if unfence else "")
    wrapper = (f'cd /; {as_user(user)} env -i HOME="{private}/home" PATH="{PATH}" '
               f'{words} {python} -m clusterkit recovery-controller "{private}"; rc=$?; '
               f'{down}exit $rc')
    return (f'set -e; d="{DIR}"; p={shlex.quote(private)}; sudo -n rm -f "$p/{READY}"; '
            f'cd /; setsid sudo -n sh -c {shlex.quote(wrapper)} > "$d/{LOG}" 2>&1 '
            f'< /dev/null & echo $!')


def ready_command(pid: int, private: str = PRIVATE) -> str:
    """Wait until the controller says it follows the job; its log's end when it died."""
    tries = READY_WAIT * 2
    return (f'd="{DIR}"; p={shlex.quote(private)}; for _ in $(seq {tries}); do '
            f'sudo -n test -s "$p/{READY}" && {{ sudo -n cat "$p/{READY}"; exit 0; }}; '
            f'[ -d /proc/{pid} ] || break; '
            f'sleep 0.5; done; tail -n 20 "$d/{LOG}" >&2; exit 1')


def python_for(sandbox: bool, private: str = PRIVATE) -> str:
    """The controller's interpreter: on AWS its virtualenv's; in the sandbox the system
    interpreter of this one's version (the nodes see this machine's /usr and the
    client's packages)."""
    if not sandbox:
        return f'"{private}/venv/bin/python"'
    return f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"


def start(rt: Runtime, jc: JobCluster, spec_file: str, job_id: str, limit: int,
          region: str, node_workdir: str | None) -> int:
    """Set the controller up on ``jc``'s master and start it (see the module's
    docstring); its pid. The job already runs: a failure says so."""
    sandbox = os.environ.get(SANDBOX_ENV) == "1"
    master = jc.master
    fenced = ""  # the proxy's address while the fence is this function's to take down
    try:
        values = settings(rt, jc, job_id, limit, region, node_workdir)
        values["proxy_address"] = ssh_address(master.node) if sandbox else "127.0.0.1"
        hosts = (cluster_dir(jc.name) / "known_hosts").read_bytes()
        tar = archive(Path(spec_file).read_text(), hosts, values)
        rt.started(Stage.TRAIN, f"setting up the recovery controller on the master "
                   f"({len(tar) >> 10} KiB)")
        made = jc.run([master], {master.hop.label: Call(
            f"{user_command()} && {setup_command(sandbox)}", tar)}, timeout=900)
        public = made[master.hop.label].stdout.strip().splitlines()[-1]
        jc.run(jc.targets, {t.hop.label: Call(AUTHORIZE, public.encode() + b"\n")
                            for t in jc.targets}, timeout=60)
        fence(rt, jc, values["proxy_address"])
        fenced = values["proxy_address"]
        give_role(rt, region, master.node.instance_id, values["profile"])
        launched = jc.run([master], {master.hop.label: Call(launch_command(
            controller_env(sandbox, master.node.instance_id), python_for(sandbox),
            shlex.join(imdsfence.rule_argv(imdsfence.Action.DELETE,
                                           values["proxy_address"]))))},
            timeout=60)
        fenced = ""  # the controller's launcher takes it down
        session = int(launched[master.hop.label].stdout.strip().splitlines()[-1])
        ready = jc.run([master], {master.hop.label: Call(ready_command(session))},
                       timeout=READY_WAIT + 30)[master.hop.label].stdout
        pid = int(json.loads(ready.strip().splitlines()[-1])["pid"])
    except (ClusterkitError, GroupError, OSError, ValueError, IndexError, KeyError) as exc:
        if fenced:
            unfence(jc, fenced)
        raise ClusterkitError(
            f"job {job_id} runs, but its recovery controller did not start: "
            f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            f"a lost node ends the job until a client recovers it: `clusterkit train "
            f"{spec_file} --attach`; the controller's log: ~/.clusterkit/controller/{LOG} "
            "on the master") from exc
    rt.done(Stage.TRAIN, f"recovery controller running on the master (pid {pid}): it "
            f"recovers job {job_id} up to {limit} time(s) with no client connected")
    return pid


def fence(rt: Runtime, jc: JobCluster, proxy_address: str) -> None:
    """Before the master wears the controller's profile: every other user's (not
    root's) connections to the instance metadata go to the controller's proxy
    (``imdsfence``), which serves all but the role's credentials; the controller's
    launcher takes the rule down as the controller exits."""
    jc.run([jc.master], {jc.master.hop.label: Call(
        fence_command(imdsfence.Action.ADD, proxy_address))}, timeout=60)
    rt.done(Stage.TRAIN, "the master's instance metadata is fenced: only the controller's "
            f"user ({USER}) and root read the role's credentials")


def unfence(jc: JobCluster, proxy_address: str) -> None:
    """The fence taken down where no controller was launched to do it (best effort: a
    rule left in place fails closed, the metadata then unread by the master's users)."""
    with contextlib.suppress(GroupError):
        jc.run([jc.master], {jc.master.hop.label: Call(
            fence_command(imdsfence.Action.DELETE, proxy_address) + " || true")}, timeout=60)


def give_role(rt: Runtime, region: str, master_instance_id: str, profile: str) -> None:
    """The master gets the controller's instance profile (in place of the nodes')."""
    if not profile:
        raise ClusterkitError("the cluster's stack has no controller role (it was made by "
                              "an older clusterkit)", "`clusterkit down` and `up` again")
    if instances.set_instance_profile(rt.session, region, master_instance_id, profile):
        rt.done(Stage.TRAIN, f"the master {master_instance_id} has the controller's "
                "instance role")


def alive(jc: JobCluster) -> bool:
    """Whether a controller holds its lock on the master (it recovers the job)."""
    probe = (f'p={shlex.quote(PRIVATE)}; sudo -n test -e "$p/{LOCK}" || '
             f'{{ echo free; exit 0; }}; '
             f'sudo -n flock -n "$p/{LOCK}" true && echo free || echo held')
    try:
        got = jc.run([jc.master], {jc.master.hop.label: Call(probe)}, timeout=30)
    except GroupError:
        return False
    return got[jc.master.hop.label].stdout.strip().endswith("held")
