"""The layer rules of DESIGN.md, checked on the source: boto3/botocore only in
clusterkit/aws, fabric/paramiko only in clusterkit/remote, moto and the sandbox nowhere in
clusterkit/ (a package of its own: tests/unit/test_sandbox_apart.py), rich only in
clusterkit/cli, and the pure layers (spec, plan, catalog, and the pure halves of
bootstrap and training) import nothing that reaches the network, runs processes or reads
the clock, and neither read the clock or the environment nor write files through what
they do import (os, pathlib, datetime)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "clusterkit"
PURE = ("spec", "plan", "catalog", "timeline")
# The pure halves of impure packages (DESIGN.md: facts -> steps -> run; topology and
# diagnose beside the supervisor); checked from the moment each file exists.
PURE_FILES = ("bootstrap/facts.py", "bootstrap/steps.py", "bootstrap/stepdata.py",
              "training/topology.py",
              "training/diagnose.py", "node/gpuhealth.py", "training/report.py",
              "training/prometheus.py",
              "node/totals.py", "node/stall.py", "node/jobstate.py", "node/paths.py",
              "node/autostop_policy.py", "training/nccl.py", "training/allreduce.py",
              "bootstrap/efa.py", "bootstrap/efa_facts.py", "bootstrap/nodefact.py",
              "node/wire.py", "node/jobfile.py", "cluster/access/console_keys.py",
              "remote/selection.py", "training/preflight.py", "training/preflight_facts.py",
              "training/budget.py", "training/sizes.py")
# top-level module -> the only sub-packages of clusterkit that may import it
ONLY_IN = {
    "boto3": ("aws",),
    "botocore": ("aws",),
    "fabric": ("remote",),
    "paramiko": ("remote",),
    "invoke": ("remote",),
    "moto": (),
    "clusterkit_sandbox": (),
}
IMPURE = {"subprocess", "socket", "http", "urllib", "requests", "shutil", "tempfile",
          "threading", "multiprocessing", "asyncio", "time", "boto3", "botocore", "fabric",
          "paramiko", "invoke", "moto"}  # rich: test_only_cli_imports_rich
IMPURE_OWN = ("aws", "remote", "sandboxmode", "cli", "cluster", "bootstrap", "training",
              "dataset", "statedir", "netguard", "autostop", "node")

CLOCK_CALLS = {"now", "utcnow", "today"}  # datetime.now(), date.today(), ...
ENV_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}
# methods that only ever write (pathlib.Path, os): flagged on any receiver
WRITE_METHODS = {"write_text", "write_bytes", "mkdir", "makedirs", "touch", "unlink",
                 "rmdir", "removedirs", "symlink_to", "hardlink_to", "chmod", "lchmod",
                 "chown", "mkfifo", "mknod", "utime"}
# names that also mean something harmless elsewhere (str.replace, list.remove): only os.X
OS_WRITES = {"remove", "rename", "renames", "replace", "link", "symlink", "truncate",
             "write", "open"}
WRITE_MODES = set("wax+")


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def _is_pure(path: Path) -> bool:
    return _layer(path) in PURE or path.relative_to(PACKAGE).as_posix() in PURE_FILES


def _pure_sources() -> list[Path]:
    return [p for p in _sources() if _is_pure(p)]


def _imports(tree: ast.AST, path: Path | None = None) -> list[str]:
    """Dotted names imported; ``from a.b import c`` gives ``a.b.c`` (c may be a module).
    A relative import (``from . import coord``, ``from .reaping import x``) is resolved
    against ``path``'s package, so it cannot slip past the layer rules."""
    package = _package(path) if path is not None else ["clusterkit"]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package[:len(package) - (node.level - 1)]
                base = ".".join([*parent, *([base] if base else [])])
            names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def _package(path: Path) -> list[str]:
    """The dotted package a source file is in: clusterkit/node/coord.py ->
    [clusterkit, node]."""
    return ["clusterkit", *path.relative_to(PACKAGE).parts[:-1]]


def _impure_import(name: str) -> bool:
    parts = name.split(".")
    if parts[0] != "clusterkit":
        return parts[0] in IMPURE
    if len(parts) < 2 or parts[1] not in IMPURE_OWN:
        return False
    return len(parts) < 3 or f"{parts[1]}/{parts[2]}.py" not in PURE_FILES


def _mode(call: ast.Call, position: int) -> str:
    """The literal mode of an open() call ("r" when not given; "?" when not a literal)."""
    found = [k.value for k in call.keywords if k.arg == "mode"]
    if len(call.args) > position:
        found.append(call.args[position])
    if not found:
        return "r"
    return found[0].value if isinstance(found[0], ast.Constant) else "?"


def _opens_for_writing(call: ast.Call) -> bool:
    func = call.func
    if isinstance(func, ast.Name) and func.id == "open":
        mode = _mode(call, 1)
    elif isinstance(func, ast.Attribute) and func.attr == "open" and not (
            isinstance(func.value, ast.Name) and func.value.id == "os"):
        mode = _mode(call, 0)  # Path.open(mode)
    else:
        return False
    return mode == "?" or bool(WRITE_MODES & set(str(mode)))


def _side_effects(tree: ast.AST) -> list[str]:
    """What in ``tree`` reads the clock or the environment or writes a file."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ENV_NAMES:
            found.append(f"environment ({node.attr}, line {node.lineno})")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"environment ({a.name}, line {node.lineno})" for a in node.names
                      if a.name in ENV_NAMES]
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else ""
        on_os = isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
            and func.value.id == "os"
        if name in CLOCK_CALLS:
            found.append(f"clock ({name}(), line {node.lineno})")
        elif name in WRITE_METHODS or (on_os and name in OS_WRITES):
            found.append(f"file write ({name}(), line {node.lineno})")
        elif _opens_for_writing(node):
            found.append(f"file write (open for writing, line {node.lineno})")
    return found


def test_sources_found():
    assert len(_sources()) > 20
    assert {_layer(p) for p in _pure_sources()} >= set(PURE)


def test_sdk_imports_stay_in_their_layer():
    wrong = []
    for path in _sources():
        for name in _imports(ast.parse(path.read_text(), str(path)), path):
            allowed = ONLY_IN.get(name.split(".")[0])
            if allowed is not None and _layer(path) not in allowed:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not wrong, wrong


def test_only_cli_imports_rich():
    wrong = [f"{path.relative_to(PACKAGE)} imports {name}" for path in _sources()
             for name in _imports(ast.parse(path.read_text(), str(path)), path)
             if name.split(".")[0] == "rich" and _layer(path) != "cli"]
    assert not wrong, wrong


def test_pure_layers_import_no_io():
    wrong = []
    for path in _pure_sources():
        for name in _imports(ast.parse(path.read_text(), str(path)), path):
            if _impure_import(name):
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not wrong, wrong


def test_pure_layers_read_no_clock_or_environment_and_write_no_file():
    wrong = [f"{path.relative_to(PACKAGE)}: {what}" for path in _pure_sources()
             for what in _side_effects(ast.parse(path.read_text(), str(path)))]
    assert not wrong, wrong


# The checker itself, on snippets: each line below must be caught, and the harmless
# look-alikes (reading a file, str.replace, dataclasses.replace, list.remove) must not.
CAUGHT = [
    "import time\ntime.time()", "from datetime import datetime\ndatetime.now()",
    "datetime.datetime.utcnow()", "date.today()", "os.environ['HOME']",
    "os.environ.get('X')", "os.getenv('X')", "from os import environ",
    "Path(p).write_text('x')", "p.write_bytes(b'')", "p.mkdir()", "os.makedirs(d)",
    "p.unlink()", "os.remove(p)", "os.replace(a, b)", "os.rename(a, b)",
    "open(p, 'w')", "open(p, mode='ab')", "open(p, 'r+')", "p.open('w')",
    "open(p, mode)", "p.touch()",
]
HARMLESS = ["open(p)", "open(p, 'rb')", "p.open()", "p.read_text()", "'a'.replace('a', 'b')",
            "replace(spec, name='x')", "items.remove(x)", "os.path.join(a, b)",
            "datetime.fromisoformat(s)"]


@pytest.mark.parametrize("source", CAUGHT)
def test_checker_catches(source):
    tree = ast.parse(source)
    assert _side_effects(tree) or any(_impure_import(n) for n in _imports(tree)), source


@pytest.mark.parametrize("source", HARMLESS)
def test_checker_lets_pass(source):
    tree = ast.parse(source)
    assert not _side_effects(tree) and not any(_impure_import(n) for n in _imports(tree))


def test_relative_imports_are_resolved_against_the_package():
    tree = ast.parse("from . import coord\nfrom .reaping import Cgroup\nfrom .. import statedir")
    assert _imports(tree, PACKAGE / "node" / "supervisor.py") == [
        "clusterkit.node.coord", "clusterkit.node.reaping.Cgroup",
        "clusterkit.statedir"]
    assert _impure_import(_imports(ast.parse("from .supervisor import x"),
                                   PACKAGE / "training" / "topology.py")[0])


def test_pure_halves_may_import_each_other_not_their_impure_siblings():
    assert not _impure_import("clusterkit.bootstrap.facts.parse_mounts")
    assert not _impure_import("clusterkit.training.topology")
    assert _impure_import("clusterkit.bootstrap.run")
    assert _impure_import("clusterkit.cluster.runtime.Runtime")
    assert not _impure_import("clusterkit.spec.model.Spec")
    assert not _impure_import("clusterkit.errors.UsageError")
