"""Helpers every test layer shares: what a test needs (root, a module), an SSH key, a
moto server on a port the OS picks, AWS variables through monkeypatch, and a cluster
name of its own. No fixtures here (they live in the conftest files), only functions."""

from __future__ import annotations

import copy
import importlib.util
import logging
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest

from clusterkit import sandboxmode

REGION = "us-east-1"
# Variables that would point a test's AWS clients somewhere else than the emulator, or
# sign with other credentials than the test's (the developer's shell's reach no test).
FOREIGN_AWS_VARS = ("AWS_REGION", *sandboxmode.DROPPED, sandboxmode.CREDENTIALS_FILE_ENV,
                    sandboxmode.CONFIG_FILE_ENV)
T = TypeVar("T")


def in_ci() -> bool:
    """CI sets CI=true (GitHub Actions, GitLab, and scripts/test.sh callers alike)."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def _unmet(why: str) -> None:
    """Skip on a developer machine; under CI a missing requirement is a failure, so a
    suite that silently skipped its sandbox tests can never pass there."""
    if in_ci():
        pytest.fail(f"CI=true but {why}", pytrace=False)
    pytest.skip(why)


def require_root(what: str = "this test") -> None:
    if os.geteuid() != 0:
        _unmet(f"{what} needs root (SSH nodes on 127.0.0.N:22, loop devices, mounts)")


def require_module(name: str) -> None:
    if importlib.util.find_spec(name) is None:
        _unmet(f"needs the {name} module (pip install -e '.[{name}]')")


def torch_python() -> str:
    """An interpreter that imports torch: CLUSTERKIT_TORCH_PYTHON, else the one
    scripts/install.sh made (its path in .venv/torch-python). Without one the test
    skips, or fails under CI."""
    chosen = os.environ.get("CLUSTERKIT_TORCH_PYTHON", "")
    if not chosen and INSTALLED_TORCH.is_file():
        chosen = INSTALLED_TORCH.read_text().strip()
    if not chosen or not os.access(chosen, os.X_OK):
        _unmet("needs an interpreter that imports torch (bash scripts/install.sh makes one; "
               "CLUSTERKIT_TORCH_PYTHON=/path/to/python overrides it)")
    return chosen


SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
INSTALLED_TORCH = SCRIPTS.parent / ".venv" / "torch-python"
TOOLS_LIST = SCRIPTS / "tools.txt"


def load_script(name: str) -> Any:
    """scripts/NAME.py as a module (the scripts are no package)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def listed_tools() -> dict[str, tuple[str, str]]:
    """scripts/tools.txt: command -> (how it is installed, package)."""
    tools = {}
    for line in TOOLS_LIST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            command, how, package = line.split()[:3]
            tools[command] = (how, package)
    return tools


def require_tool(name: str) -> str:
    """The path of the external command ``name`` (PATH, sbin, then this interpreter's
    environment, where the pip-installed tools are). A tool scripts/tools.txt does not
    list fails at once, installed here or not: it would be missing on a fresh machine."""
    if name not in listed_tools():
        pytest.fail(f"{name} is not in scripts/tools.txt: list it there so "
                    "scripts/install.sh installs it", pytrace=False)
    where = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", ""),
                             "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=where)
    if found is None:
        _unmet(f"{name} is not installed (bash scripts/install.sh installs it)")
    return found


def shellcheck_clean(*scripts: Path) -> None:
    """Assert ``scripts`` pass shellcheck (a missing shellcheck fails on CI)."""
    shellcheck = require_tool("shellcheck")
    out = subprocess.run([shellcheck, "--shell=bash", *map(str, scripts)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def unique_name(prefix: str) -> str:
    """A cluster (or key pair) name no other test uses: tests share one emulator."""
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def ssh_keygen(path: Path) -> Path:
    """A passphrase-less ed25519 key pair at ``path`` / ``path``.pub; returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True)
    return path


def public_key(path: Path) -> str:
    """"ssh-ed25519 AAAA..." of the key pair at ``path`` (no comment)."""
    return " ".join(Path(f"{path}.pub").read_text().split()[:2])


def fingerprint(path: Path) -> str:
    """SHA256:... of the key pair at ``path``, as ssh-keygen prints it."""
    out = subprocess.run(["ssh-keygen", "-lf", f"{path}.pub"], capture_output=True,
                         text=True, check=True).stdout
    return out.split()[1]


def user_ssh_key(home: Path) -> Path:
    """The user's key where clusterkit looks without an agent: HOME/.ssh/id_ed25519."""
    return ssh_keygen(home / ".ssh" / "id_ed25519")


@contextmanager
def moto_server() -> Iterator[str]:
    """moto in server mode on 127.0.0.1, the port chosen by the OS when it binds (no
    bind-then-close race). In one process every server shares moto's backends."""
    from moto.server import ThreadedMotoServer

    from clusterkit_sandbox import moto_speed

    moto_speed.install()  # as the sandbox's emulator does
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def forget_default_session() -> None:
    """boto3's default session (``boto3.client(...)``) resolves its credentials once:
    after the AWS environment changed, the next one reads them again. A sandbox refuses
    any key but its own of this start."""
    import boto3

    boto3.DEFAULT_SESSION = None


def aws_env(monkeypatch: pytest.MonkeyPatch, endpoint: str, region: str = REGION,
            **extra: str) -> None:
    """Point every AWS client at ``endpoint`` with throwaway credentials, undone by
    ``monkeypatch``; no profile or region from the developer's shell leaks in."""
    forget_default_session()
    for name in FOREIGN_AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    values = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
              "AWS_SECRET_ACCESS_KEY": "testing", "AWS_SESSION_TOKEN": "testing",
              "AWS_DEFAULT_REGION": region, **extra}
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def sandbox_aws_env(monkeypatch: pytest.MonkeyPatch, where: Path, region: str = REGION) -> None:
    """Sandbox mode for the sandbox running in ``where`` (its endpoint, its credentials
    file), undone by ``monkeypatch``; nothing of the developer's shell leaks in."""
    forget_default_session()
    for name in FOREIGN_AWS_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in {**sandboxmode.sandbox_env(str(where)),
                        "AWS_DEFAULT_REGION": region}.items():
        monkeypatch.setenv(name, value)


def wait_for(condition: Callable[[], T], what: str, timeout: float = 15.0,
             interval: float = 0.05) -> T:
    """Poll ``condition`` until it returns something true, and return that; raise
    TimeoutError naming ``what`` after ``timeout`` s. For state another process (the
    sandbox's node agent) changes asynchronously: never a fixed sleep."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: still not so after {timeout} s")
        time.sleep(interval)


def hold_fault(seconds: float, what: str) -> None:
    """Keep a fault in place for ``seconds``: a chaos case's fault lasts a given while
    (shorter than a timeout it must not trip), the length itself being the case; not a
    wait for something to happen (that is ``wait_for``). ``what`` names it."""
    assert 0 < seconds <= 60, f"{what}: a fault held {seconds} s"
    time.sleep(seconds)


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` laid on it, key by key (a test case's changes to a default
    spec or cluster): nested dicts merge, ``None`` removes the key."""
    out = copy.deepcopy(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def observed(spec: Any, *, region: str = REGION, nodes: Any = (), stack: str | None = None,
             params: Any = "wanted", key_pair_missing: bool = False, candidates: Any = (),
             offers: Any = ()) -> Any:
    """A plan.world.Observed for planning tests: ``stack`` its status (None: no
    stack), its parameters those the spec wants (``params="wanted"``) or the mapping given;
    ``offers`` the search's answer (ranked by plan_up); ``candidates`` offers that are
    also the fallback (a plan that launches at the first of them whatever the ranking)."""
    from clusterkit.plan.stack import Facts, stack_parameters
    from clusterkit.plan.world import Observed, StackSeen

    facts = Facts(vpc_id="vpc-0123456789abcdef0", image_id="ami-0123456789abcdef0",
                  root_device="/dev/sda1", key_name=f"clusterkit-{spec.name}",
                  ssh_cidr="203.0.113.7/32")
    seen = None
    if stack is not None:
        seen = StackSeen(stack, stack_parameters(spec, facts) if params == "wanted" else params)
    return Observed(region, tuple(nodes), seen, facts, key_pair_missing,
                    offers=tuple(offers) or tuple(candidates), regions=(region,),
                    fallback=candidates[0] if candidates else None)


def offer(instance_type: str, market: str, price: float | None, *, az: str = "us-east-1a",
          region: str = REGION, on_demand: float | None = None, gpus: int = 0) -> Any:
    """A catalog.ranking.Offer for planning tests."""
    from clusterkit.catalog.ranking import Offer

    return Offer(instance_type, region, az, None, market, price,
                 on_demand if on_demand is not None else price, gpus)
