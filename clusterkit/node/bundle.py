"""What a node gets, assembled in one place (the client side of ``clusterkit.node``).

Two ways in: files put into a directory on the node (the supervisor into every job dir,
the autostop watchdog into its own dir), where they import each other by bare name; and one
program sent over SSH stdin (``python3 - ARGS``: the follower, the observer) with the
modules it imports put in ``sys.modules`` ahead of it."""

from __future__ import annotations

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
            "wire", "totals", "samples", "frames")  # the records it reads, answers with


def files(names: tuple[str, ...] = SUPERVISOR) -> dict[str, str]:
    """The node files ``names`` (of this package): file name -> text."""
    return {name: (HERE / name).read_text() for name in names}


def program(name: str, modules: tuple[str, ...] = ("jobstate",)) -> bytes:
    """The node program ``name`` as sent over SSH stdin (``python3 - ARGS``), with
    ``modules`` (of this package, in order) put in sys.modules first, so it imports the
    same definitions the client uses."""
    prelude = "import sys, types\n"
    for module, text in files(tuple(f"{m}.py" for m in modules)).items():
        module = module.removesuffix(".py")
        prelude += (f"_m = sys.modules[{module!r}] = types.ModuleType({module!r})\n"
                    f"exec(compile({text!r}, {module + '.py'!r}, 'exec'), _m.__dict__)\n")
    prelude += "del _m\n" if modules else ""
    return prelude.encode() + (HERE / name).read_bytes()
