"""bench/bench_first_step.py --image: the seed's GPU stack as the spec's packages (the
wheels' real sizes, bench/packages_mxnet_cu112.json, downloaded at the sourced rate from
the sandbox's package index: clusterkit_sandbox.pypi), and at size 1: `up` -> first step
of a new cluster that installs them, `clusterkit image build` of that spec (not a
measured window: its wall is printed), and `up` -> first step of another new cluster on
the image, and of one more on the image that mounts a file system of yours (made before
the build, tagged clusterkit:lend=true, a mount target in every AZ). The env step's seconds on each node: the env's own files (pyvenv.cfg made
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
# the same on the image, mounting a file system of yours (made before, with a mount
# target in each AZ, as the console makes one): its mount target is lent, none made
YOURS_UP = "image + your EFS -> first step"
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


def your_file_system() -> tuple[str, str]:
    """A file system made outside clusterkit (tagged clusterkit:lend=true), a mount
    target in each subnet of the default VPC, in a group of its own: (its id, the group).
    Its waits run while the image is built."""
    import boto3

    ec2, efs = boto3.client("ec2"), boto3.client("efs")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]
    group = ec2.create_security_group(GroupName=f"yours-{time.time_ns()}", Description="yours",
                                      VpcId=vpc["VpcId"])["GroupId"]
    fs_id = efs.create_file_system(CreationToken=f"yours-{time.time_ns()}", Tags=[
        {"Key": "clusterkit:lend", "Value": "true"}])["FileSystemId"]
    while efs.describe_file_systems(FileSystemId=fs_id)["FileSystems"][0][
            "LifeCycleState"] != "available":
        time.sleep(1)
    for subnet in ec2.describe_subnets(Filters=[{"Name": "vpc-id", "Values": [vpc["VpcId"]]}])[
            "Subnets"]:
        efs.create_mount_target(FileSystemId=fs_id, SubnetId=subnet["SubnetId"],
                                SecurityGroups=[group])
    return fs_id, group


def _available(fs_id: str) -> None:
    import boto3

    efs = boto3.client("efs")
    while any(t["LifeCycleState"] != "available"
              for t in efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]):
        time.sleep(1)


def _drop_file_system(fs_id: str, group: str) -> None:
    import boto3

    efs = boto3.client("efs")
    for target in efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]:
        efs.delete_mount_target(MountTargetId=target["MountTargetId"])
    while efs.describe_mount_targets(FileSystemId=fs_id)["MountTargets"]:
        time.sleep(1)
    efs.delete_file_system(FileSystemId=fs_id)
    boto3.client("ec2").delete_security_group(GroupId=group)


def image_runs(bench: Any, measure: Callable[..., Any],
               first_step: Callable[..., Any]) -> tuple[list[Any], list[str]]:
    """The three measured windows and the lines on the image (its build, each node's env)."""
    from clusterkit.cluster.provision import imagebuild
    from clusterkit.spec import load

    bench.packages = stock_index(bench.tmp / "sandbox")
    installs, env, spec = _measured(bench, measure, first_step, PACKAGES_UP, "pk")
    yours, group = your_file_system()
    start = time.time()
    built = imagebuild.build(bench.runtime(), load(str(spec)), yes=True, timeout=1800)
    lines = [f"image build of {spec.stem}: {built.image_id} in {time.time() - start:.1f} s "
             "wall (builder up, env step, CreateImage and its wait, builder down)",
             f"env step per node, {PACKAGES_UP}: " + ", ".join(f"{s:.2f} s" for s in env)]
    try:
        on_image, env, _ = _measured(bench, measure, first_step, IMAGE_UP, "im")
        lines.append(f"env step per node, {IMAGE_UP}: " + ", ".join(f"{s:.2f} s" for s in env))
        _available(yours)
        bench.efs_id = yours
        on_yours, env, _ = _measured(bench, measure, first_step, YOURS_UP, "iy")
        lines.append(f"env step per node, {YOURS_UP}: " + ", ".join(f"{s:.2f} s" for s in env))
    finally:
        bench.efs_id = None
        imagebuild.delete_image(bench.runtime(), "us-east-1", built.image_id)
        _drop_file_system(yours, group)
    bench.packages = []
    return [installs, on_image, on_yours], lines
