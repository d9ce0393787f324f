"""What a node gets, assembled in one place (the client side of ``clusterkit.node``).

Two ways in: files put into a directory on the node (the supervisor into every job dir,
the autostop watchdog into its own dir), where they import each other by bare name; and one
program sent over SSH stdin (``python3 - ARGS``: the follower, the observer) with the
modules it imports put in ``sys.modules`` ahead of it."""

from __future__ import annotations

import ast
from pathlib import Path

HERE = Path(__file__).parent
# The supervisor's files in every job dir: supervisor.py imports the others from there.
SUPERVISOR = ("supervisor.py", "supervisor_daemon.py", "coord.py", "reaping.py",
              "jobstate.py", "interruption.py", "sampler.py", "samples.py", "totals.py",
              "stall.py", "gpuhealth.py", "gpuwatch.py", "nodefiles.py", "paths.py", "daemonize.py",
              "link.py", "wire.py", "jobfile.py", "nodestate.py", "procgroup.py",
              "watchers.py")
# The watchdog's files in the autostop dir (paths.AUTOSTOP_DIR): it imports the others.
WATCHDOG = ("watchdog.py", "autostop_policy.py", "nodefiles.py", "paths.py", "daemonize.py",
            "link.py", "wire.py", "jobfile.py", "jobstate.py", "nodestate.py")
# What each program sent over stdin imports, sent before it, in order.
FOLLOWER = ("paths", "wire", "jobfile", "jobstate", "nodefiles", "nodestate", "totals",
            "samples")
OBSERVER = ("paths", "gpuhealth", "gpuwatch", "nodefiles",  # gpuwatch: the GPUs' health
            "wire", "jobfile", "jobstate", "nodestate",  # the job's state.json, passed on
            "totals", "samples", "frames")  # the records it reads, answers with


def files(names: tuple[str, ...] = SUPERVISOR) -> dict[str, str]:
    """The node files ``names`` (of this package): file name -> text."""
    return {name: (HERE / name).read_text() for name in names}


# Ahead of a program sent over stdin: a finder that compiles and runs a module of
# _SOURCES only when the program first imports it (a `top` frame needs neither the GPU
# health modules nor most records: each compiled module costs its node CPU on every call).
_LAZY = """import importlib.machinery as _machinery, sys as _sys
class _Sent:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        return _machinery.ModuleSpec(name, cls) if name in _SOURCES else None
    @staticmethod
    def create_module(spec):
        return None
    @staticmethod
    def exec_module(module):
        text = _SOURCES.pop(module.__name__)
        exec(compile(text, module.__name__ + ".py", "exec"), module.__dict__)
_sys.meta_path.insert(0, _Sent)
"""


def program(name: str, modules: tuple[str, ...] = ("jobstate",)) -> bytes:
    """The node program ``name`` as sent over SSH stdin (``python3 - ARGS``), with
    ``modules`` (of this package) importable by name ahead of it, each compiled when the
    program first imports it, so it uses the same definitions the client uses."""
    sources = {m.removesuffix(".py"): text
               for m, text in files(tuple(f"{m}.py" for m in modules)).items()}
    text = (HERE / name).read_text()
    # the prelude comes first, so the program's docstring is no longer the module's:
    # kept as __doc__ (the usage a program prints for a verb it does not know)
    doc = f"__doc__ = {ast.get_docstring(ast.parse(text), clean=False)!r}\n"
    prelude = doc + (f"_SOURCES = {sources!r}\n" + _LAZY if modules else "")
    return prelude.encode() + text.encode()
