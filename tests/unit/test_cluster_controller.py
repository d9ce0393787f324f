"""cluster/jobs/controller.py's pure parts: what a detached job's controller may be
started for, the shell it runs on the master (run here by bash against a fake $HOME, as
far as it needs no node), its environment (nothing secret, no credential) and what it
imports (the dependencies its virtualenv gets on AWS, nothing else)."""

from __future__ import annotations

import io
import json
import os
import shlex
import subprocess
import sys
import tarfile

import pytest

from clusterkit.cluster.jobs import controller
from clusterkit.errors import UsageError
from clusterkit.node import imdsfence
from clusterkit.remote.incluster import CONTROLLER_KEY_ENV


def test_a_workdir_synced_to_each_node_is_refused_efs_or_none_is_not():
    with pytest.raises(UsageError, match="needs its workdir on EFS") as caught:
        controller.check(False)
    assert caught.value.exit_code == 2 and "storage.efs" in caught.value.hint
    controller.check(True)
    controller.check(None)


def test_the_archive_holds_settings_spec_known_hosts_and_the_package_only():
    values = {"cluster": "c1", "job_id": "j1", "max_recoveries": 2}
    data = controller.archive("name: c1\n", b"host key\n", values)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        assert json.load(tar.extractfile(controller.SETTINGS)) == values
        assert tar.extractfile("home/clusters/c1/known_hosts").read() == b"host key\n"
        assert all(m.mode == 0o600 for m in tar.getmembers())
    assert "lib/clusterkit/cluster/jobs/controller_daemon.py" in names
    # what a checkout links in (the playbooks the controller's `up` runs, the template)
    assert "lib/clusterkit/resources/playbooks/hostname.sh" in names
    assert "lib/clusterkit/resources/cluster.yaml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if not n.startswith(("lib/clusterkit/", "home/"))
                and n not in (controller.SETTINGS, controller.SPEC_COPY)]


def test_setup_unpacks_makes_one_key_and_prints_its_public_line(tmp_path):
    """The sandbox's setup command (no virtualenv) run by bash: twice, one key, in the
    controller user's private directory (here root's, in tmp_path: the real user is made
    on a sandbox node, tests/e2e/test_train_recovery.py); its public line in the
    login's."""
    tar = controller.archive("name: c1\n", b"k\n", {"cluster": "c1"})
    env = {"HOME": str(tmp_path / "home"), "PATH": os.environ["PATH"]}
    private = tmp_path / "private" / "controller"
    runs = [subprocess.run(["bash", "-c", controller.setup_command(
        sandbox=True, private=str(private), user="root")], input=tar, capture_output=True,
        env=env, check=True) for _ in range(2)]
    first, second = (r.stdout.decode().strip().splitlines()[-1] for r in runs)
    assert first == second and first.startswith("ssh-ed25519 ")
    assert (private / controller.KEY).stat().st_mode & 0o777 == 0o600
    assert private.stat().st_mode & 0o777 == 0o700
    assert (private / "lib/clusterkit/__init__.py").is_file()
    assert (private / controller.SETTINGS).is_file()
    where = tmp_path / "home" / ".clusterkit" / "controller"
    assert where.stat().st_mode & 0o777 == 0o700
    assert sorted(p.name for p in where.iterdir()) == [f"{controller.KEY}.pub"]
    assert (where / f"{controller.KEY}.pub").read_text().strip() == first


def test_on_aws_setup_makes_a_virtualenv_of_the_pinned_dependencies():
    text = controller.setup_command(sandbox=False)
    assert 'python3 -m venv "$p/venv"' in text
    for pinned in controller.pinned_dependencies():
        assert pinned in text and "==" in pinned


def test_authorize_adds_the_key_once(tmp_path):
    env = {"HOME": str(tmp_path), "PATH": os.environ["PATH"]}
    for _ in range(2):
        subprocess.run(["bash", "-c", controller.AUTHORIZE], input=b"ssh-ed25519 AAAA c\n",
                       env=env, check=True)
    assert (tmp_path / ".ssh/authorized_keys").read_text() == "ssh-ed25519 AAAA c\n"


def test_the_environment_outside_the_sandbox_is_paths_only():
    env = controller.controller_env(False, "i-0123")
    assert env[CONTROLLER_KEY_ENV] == f"{controller.PRIVATE}/{controller.KEY}"
    assert not [k for k in env if k.startswith("AWS_")]
    command = controller.launch_command(env, controller.python_for(False))
    assert command.count("setsid sudo -n sh -c ") == 1 and "recovery-controller" in command
    assert command.count(f"{controller.as_user(controller.USER)} env -i ") == 1


def test_a_value_that_could_break_out_of_its_quotes_is_refused():
    for bad in ('a"b', "a`b`", "$(reboot)", "a\\b", "x\ny"):
        with pytest.raises(ValueError, match="cannot pass"):
            controller.launch_command({"X": bad}, "python3")
    assert 'X="$HOME/a"' in controller.launch_command({"X": "$HOME/a"}, "python3")


def _closure(names: list[str]) -> set[str]:
    """The distributions ``names`` need, theirs too (normalized names)."""
    import importlib.metadata as md
    import re

    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in seen:
            continue
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:  # required only under a marker this Python fails
            continue
        seen.add(name)
        for req in requires:
            if "extra ==" not in req:
                todo.append(re.match(r"[A-Za-z0-9_.-]+", req).group(0))
    return seen


def test_the_controller_command_imports_only_its_dependencies():
    """What the virtualenv gets on AWS is enough: every third-party module the
    controller's command loads comes from DEPENDENCIES or what they need."""
    import importlib.metadata as md
    import re

    probe = ("import sys; import clusterkit.cli.main, clusterkit.cluster.jobs.controller_daemon,"
             " clusterkit.cluster.jobs.attach, clusterkit.cluster.jobs.recovery;"
             # boto3 is imported once a session is made, as the controller makes one
             " import clusterkit.aws.session as s; s.make_session('us-east-1');"
             " print(' '.join(sorted({m.split('.')[0] for m in sys.modules})))")
    loaded = set(subprocess.run([sys.executable, "-c", probe], capture_output=True,
                                text=True, check=True).stdout.split())
    allowed = _closure(list(controller.DEPENDENCIES)) | {"clusterkit"}
    owners = md.packages_distributions()
    # setuptools' site hook (a .pth file, not an import) and botocore's optional CA
    # bundle (it falls back to its own)
    loaded -= {"_distutils_hack", "certifi"}
    outside = {module: owners[module] for module in loaded if module in owners and not
               {re.sub(r"[-_.]+", "-", d).lower() for d in owners[module]} & allowed}
    assert outside == {}
    assert "boto3" in loaded and "paramiko" in loaded  # the probe loaded the real thing


@pytest.mark.parametrize("unfence, said", [("true", "took the metadata fence down"),
                                           ("false", "the metadata fence may still be in place")])
def test_the_launcher_takes_the_fence_down_as_the_controller_exits(tmp_path, unfence, said):
    """The launch command run by bash, the controller a stand-in that exits at once (as
    root in tmp_path: the real one on a sandbox node): its launcher runs the fence's
    DELETE after it, whatever it exited with, and says so in the controller's log."""
    home = tmp_path / "home"
    (home / ".clusterkit" / "controller").mkdir(parents=True)
    command = controller.launch_command({"X": "1"}, "/bin/echo", unfence,
                                        private=str(tmp_path), user="root")
    got = subprocess.run(["bash", "-c", command + "; wait"], env={  # wait: its end
        "HOME": str(home), "PATH": os.environ["PATH"]}, capture_output=True, text=True,
        check=True)
    int(got.stdout.strip())
    log = (home / ".clusterkit" / "controller" / controller.LOG).read_text()
    assert log.splitlines() == [f"-m clusterkit recovery-controller {tmp_path}", said]


def test_the_fence_command_is_the_rule_through_sudo():
    assert controller.fence_command(imdsfence.Action.ADD, "127.0.0.1") == \
        "sudo -n " + shlex.join(imdsfence.rule_argv(imdsfence.Action.ADD, "127.0.0.1"))
    with pytest.raises(imdsfence.FenceError):
        controller.fence_command(imdsfence.Action.ADD, "127.0.0.1; reboot")
