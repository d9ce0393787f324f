"""The sandbox is a package of its own (sandbox/clusterkit_sandbox, installed beside
clusterkit) and the product imports nothing of it: sandbox mode is configuration the
sandbox hands the product (its mode.json, read by clusterkit.sandboxmode). Checked on the
source as test_layers checks the layers:

- no module of clusterkit/ imports clusterkit_sandbox or moto, at its top, inside a
  function (a lazy import) or under TYPE_CHECKING, nor names either in a string it could
  import or run later (importlib, ``python -m``): any string but a docstring;
- the sandbox package keeps its own rule: click and rich only in its command (cli.py);
- the CLI finds `clusterkit sandbox` through the entry point the package registers, reads
  entry points only for a name it does not know, works in sandbox mode with neither
  package importable, and without the sandbox says how to install it (exit 2)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from tests.unit.test_layers import _imports

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ROOT / "clusterkit"
SANDBOX = ROOT / "sandbox" / "clusterkit_sandbox"
APART = ("clusterkit_sandbox", "moto")  # never imported by the product
ONLY_IN_ITS_COMMAND = ("click", "rich")  # in the sandbox package: cli.py's alone


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (a module's, class's or function's)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def reaches_the_sandbox(source: str, path: Path = PRODUCT / "module.py") -> list[str]:
    """What in ``source`` imports the sandbox or moto, or names them to import later."""
    tree = ast.parse(source)
    found = [f"imports {name}" for name in _imports(tree, path)
             if name.split(".")[0] in APART]
    skip = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and id(node) not in skip:
            words = node.value.replace(":", " ").split()
            found += [f"names {word!r} (line {node.lineno})" for word in words
                      if word.strip("`'\"").split(".")[0] in APART]
    return found


def test_both_packages_are_found():
    assert len(list(PRODUCT.rglob("*.py"))) > 100
    assert len(list(SANDBOX.glob("*.py"))) > 20
    assert not (PRODUCT / "sandbox").exists()


def test_no_product_module_imports_the_sandbox_or_moto():
    wrong = [f"{path.relative_to(ROOT)} {what}" for path in sorted(PRODUCT.rglob("*.py"))
             for what in reaches_the_sandbox(path.read_text(), path)]
    assert not wrong, wrong


CAUGHT = [
    "import moto", "import moto.ec2", "from moto import mock_aws",
    "import clusterkit_sandbox.client", "from clusterkit_sandbox import state",
    "def f():\n    from clusterkit_sandbox.control import do_start\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from clusterkit_sandbox import node\n",
    "import importlib\nimportlib.import_module('clusterkit_sandbox.cli')",
    "subprocess.run([sys.executable, '-m', 'clusterkit_sandbox.server'])",
    "EP = 'clusterkit_sandbox.cli:sandbox'",
]
HARMLESS = [
    '"""The sandbox (clusterkit_sandbox) hands us its configuration."""',
    "def f():\n    'reads what clusterkit_sandbox.client writes'\n",
    "from clusterkit import sandboxmode", "import clusterkit.netguard",
    "HINT = 'start it with `clusterkit sandbox start`'", "import motor",
]


@pytest.mark.parametrize("source", CAUGHT)
def test_checker_catches(source):
    assert reaches_the_sandbox(source), source


@pytest.mark.parametrize("source", HARMLESS)
def test_checker_lets_pass(source):
    assert not reaches_the_sandbox(source), source


def test_only_the_sandboxs_command_imports_click_or_rich():
    wrong = [f"{path.name} imports {name}" for path in sorted(SANDBOX.glob("*.py"))
             if path.name != "cli.py"
             for name in _imports(ast.parse(path.read_text()))  # a relative one: not these
             if name.split(".")[0] in ONLY_IN_ITS_COMMAND]
    assert not wrong, wrong


def test_the_installed_sandbox_registers_its_command():
    from clusterkit.cli import main

    (entry,) = [ep for ep in entry_points(group=main.ENTRY_POINT_GROUP) if ep.name == "sandbox"]
    assert entry.value == "clusterkit_sandbox.cli:sandbox"
    assert "sandbox" not in main.COMMAND_MODULES and set(main.ADD_ONS) == {"sandbox"}
    assert "sandbox = \"clusterkit_sandbox.cli:sandbox\"" in (
        ROOT / "sandbox" / "pyproject.toml").read_text()


# A clusterkit where neither the sandbox nor moto can be imported and no package adds a
# command: the user's install without the sandbox.
WITHOUT_SANDBOX = """
import sys

class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("clusterkit_sandbox", "moto"):
            raise ModuleNotFoundError(f"No module named {name!r} (not installed here)")

sys.meta_path.insert(0, Absent())
from clusterkit.cli import main
main.added_commands = lambda: {}
sys.argv = ["clusterkit", *sys.argv[1:]]
main.main()
"""


def _without_sandbox(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "CLUSTERKIT_SANDBOX_DIR": str(tmp_path / "sandbox")}
    return subprocess.run([sys.executable, "-c", WITHOUT_SANDBOX, *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_without_the_sandbox_its_command_says_how_to_install_it(tmp_path):
    out = _without_sandbox(tmp_path, "sandbox", "start")
    assert out.returncode == 2, out.stderr
    assert "`clusterkit sandbox` comes with the clusterkit-sandbox package, which is not " \
           "installed" in out.stderr, out.stderr
    assert "pip install -e ./sandbox" in out.stderr and "Traceback" not in out.stderr
    said = _without_sandbox(tmp_path, "--json", "sandbox", "status")
    assert said.returncode == 2
    assert json.loads(said.stdout)["exit_code"] == 2
    listed = _without_sandbox(tmp_path, "--help")
    assert listed.returncode == 0 and "Cluster commands" in listed.stdout, listed.stderr
    assert "Sandbox commands" not in listed.stdout
    assert not [line for line in listed.stdout.splitlines() if line.startswith("  sandbox ")]


def test_sandbox_mode_needs_nothing_of_the_sandbox_package(tmp_path):
    """--sandbox with no sandbox running: the product's own message, with neither the
    sandbox package nor moto importable."""
    out = _without_sandbox(tmp_path, "--sandbox", "status")
    assert out.returncode == 1, out.stderr
    assert "the sandbox is not running (state dir" in out.stderr, out.stderr
    assert "start it with `clusterkit sandbox start`" in out.stderr


def test_a_built_in_command_reads_no_entry_points():
    """Entry points are read for a name clusterkit does not know (and for help's list),
    never to run one of its own commands: start-up stays what it was."""
    probe = ("import importlib.metadata, click\n"
             "def refuse(*a, **k): raise AssertionError('entry points read')\n"
             "importlib.metadata.entry_points = refuse\n"
             "from clusterkit.cli import main\n"
             "main.added_commands.cache_clear()\n"
             "for name in ('train', 'up', 'validate'):\n"
             "    assert main.cli.get_command(click.Context(main.cli), name) is not None\n"
             "print('ok')")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.strip() == "ok", out.stderr
