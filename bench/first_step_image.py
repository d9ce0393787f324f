"""bench/bench_first_step.py --image: the seed's GPU stack as the spec's packages (the
wheels' real sizes, bench/packages_mxnet_cu112.json, downloaded at the sourced rate from
the sandbox's package index: clusterkit_sandbox.pypi), and at size 1: `up` -> first step
of a new cluster that installs them, `clusterkit image build` of that spec (not a
measured window: its wall is printed), and `up` -> first step of another new cluster on
the image. The env step's seconds on each node: the env's own files (pyvenv.cfg made
first, the complete-marker last), or 0 where the step was already done (the image)."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

PACKAGES = Path(__file__).with_name("packages_mxnet_cu112.json")
PACKAGES_UP = "packages -> first step"  # a new cluster that installs train.packages
IMAGE_UP = "image -> first step"  # a new cluster on the image of the same spec
STAND_IN = "ckbench-"  # each package's stand-in project: this prefix and its name
ENV_SECONDS = ("/usr/bin/python3 -c 'import os; d = os.path.realpath(\"/opt/clusterkit/"
               "envs/current\"); print(os.stat(d + \"/.clusterkit-packages\").st_mtime"
               " - os.stat(d + \"/pyvenv.cfg\").st_mtime)'")


def wheel(name: str, version: str) -> tuple[str, bytes]:
    """A small pure-Python wheel of project ``name`` (its module ``_<name>``: nothing a
    job imports), standing in for a real one; its size is modeled."""
    dist = name.replace("-", "_")
    info = f"{dist}-{version}.dist-info"
    files = {f"_{dist}/__init__.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: bench\nRoot-Is-Purelib: true\n"
                              "Tag: py3-none-any\n"}

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{p},sha256={digest(t)},{len(t.encode())}\n" for p, t in files.items())
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for path, text in {**files, f"{info}/RECORD": record + f"{info}/RECORD,,\n"}.items():
            zf.writestr(path, text)
    return f"{dist}-{version}-py3-none-any.whl", buf.getvalue()


def stock_index(sandbox_dir: Path) -> list[str]:
    """The stand-in wheels and their real sizes in the sandbox's package index; the
    requirements (name==version) for train.packages."""
    from clusterkit_sandbox.node import shared_dir
    from clusterkit_sandbox.pypi import SIZES_FILE
    from clusterkit_sandbox.state import RUN_DIR

    wheels = shared_dir(sandbox_dir / RUN_DIR) / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    sizes, wanted = {}, []
    for p in json.loads(PACKAGES.read_text())["packages"]:
        name = STAND_IN + p["name"]  # validate refuses mxnet-cu112 on a CPU type
        filename, data = wheel(name, p["version"])
        (wheels / filename).write_bytes(data)
        sizes[filename] = p["bytes"]
        wanted.append(f"{name}=={p['version']}")
    (wheels / SIZES_FILE).write_text(json.dumps(sizes))
    return wanted


def env_seconds(bench: Any, name: str) -> list[float]:
    """Each node's env step: 0 where it was done already, else the env's own span."""
    from clusterkit.bootstrap.run import Outcome
    from clusterkit.cluster.access.remote_ops import do_exec

    up = bench.last_up
    out = []
    for node in up.bootstrap.nodes:
        (env,) = [s for s in node.steps if s.step == "env"]
        if env.outcome is not Outcome.RAN:
            out.append(0.0)
            continue
        (res,) = do_exec(name, [ENV_SECONDS], nodes=[node.label],
                         rt=bench.runtime()).values()
        out.append(float(res.stdout.strip()))
    return out


def _measured(bench: Any, measure: Callable[..., Any], first_step: Callable[..., Any],
              what: str, prefix: str) -> tuple[Any, list[float], Path]:
    """`up` -> first step of a new 1-node cluster (taken down after), its env step per
    node, and its spec."""
    from clusterkit.cluster.provision.down import do_down

    spec, name = bench.spec(1, prefix=prefix)
    try:
        return measure(bench, what, 1, first_step(bench, spec, 1), cpu=True), \
            env_seconds(bench, name), spec
    finally:
        do_down(name, yes=True, rt=bench.runtime(), timeout=900)


def image_runs(bench: Any, measure: Callable[..., Any],
               first_step: Callable[..., Any]) -> tuple[list[Any], list[str]]:
    """The two measured windows and the lines on the image (its build, each node's env)."""
    from clusterkit.cluster.provision import imagebuild
    from clusterkit.spec import load

    bench.packages = stock_index(bench.tmp / "sandbox")
    installs, env, spec = _measured(bench, measure, first_step, PACKAGES_UP, "pk")
    start = time.time()
    built = imagebuild.build(bench.runtime(), load(str(spec)), yes=True, timeout=1800)
    lines = [f"image build of {spec.stem}: {built.image_id} in {time.time() - start:.1f} s "
             "wall (builder up, env step, CreateImage and its wait, builder down)",
             f"env step per node, {PACKAGES_UP}: " + ", ".join(f"{s:.2f} s" for s in env)]
    try:
        on_image, env, _ = _measured(bench, measure, first_step, IMAGE_UP, "im")
    finally:
        imagebuild.delete_image(bench.runtime(), "us-east-1", built.image_id)
    bench.packages = []
    return [installs, on_image], lines + [
        f"env step per node, {IMAGE_UP}: " + ", ".join(f"{s:.2f} s" for s in env)]
