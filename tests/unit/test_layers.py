"""The layer rules of DESIGN.md, checked on the source: boto3/botocore only in
clusterkit/aws, fabric/paramiko only in clusterkit/remote (the sandbox may use both
for its own emulation), and the pure layers (spec, plan, catalog, training) import
nothing that reaches the network, runs processes, or reads the clock."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).parents[2] / "clusterkit"
PURE = ("spec", "plan", "catalog", "training")
# top-level module -> the only sub-packages of clusterkit that may import it
ONLY_IN = {
    "boto3": ("aws", "sandbox"),
    "botocore": ("aws", "sandbox"),
    "fabric": ("remote", "sandbox"),
    "paramiko": ("remote", "sandbox"),
    "invoke": ("remote", "sandbox"),
    "moto": ("sandbox",),
}
IMPURE = {"subprocess", "socket", "http", "urllib", "requests", "shutil", "tempfile",
          "threading", "multiprocessing", "asyncio", "time", "boto3", "botocore", "fabric",
          "paramiko", "invoke", "moto"}
IMPURE_OWN = ("aws", "remote", "sandbox", "cli", "cluster", "bootstrap")


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else ""


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_sources_found():
    assert len(_sources()) > 20


def test_sdk_imports_stay_in_their_layer():
    wrong = []
    for path in _sources():
        for name in _imports(path):
            allowed = ONLY_IN.get(name.split(".")[0])
            if allowed is not None and _layer(path) not in allowed:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not wrong, wrong


def test_pure_layers_do_no_io():
    wrong = []
    for path in _sources():
        if _layer(path) not in PURE:
            continue
        for name in _imports(path):
            top = name.split(".")[0]
            own = name.split(".")[1] if top == "clusterkit" and "." in name else ""
            if top in IMPURE or own in IMPURE_OWN:
                wrong.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not wrong, wrong
