"""Regenerate the generated parts of README.md (so they cannot drift from the code).

    python scripts/readme.py --write    # rewrite them in README.md
    python scripts/readme.py --check    # exit 1 if README.md holds anything else

Each part sits between ``<!-- generated:NAME -->`` and ``<!-- /generated:NAME -->``:
  spec-keys      every key of cluster.yaml (clusterkit.spec.doc, from spec/keys.py)
  example-costs  per example: the offline plan's offer and $/h, the vCPU quotas it needs
  iam-policy     docs/iam-policy.json (scripts/iam_policy.py), to paste into IAM
  install-tools  what scripts/install.sh installs, from scripts/tools.txt
  sandbox-timings  the timed sandbox's figures, scaled, with their sources
                 (clusterkit_sandbox.timings, the one table)
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import sys
from collections.abc import Callable
from pathlib import Path

from clusterkit.catalog import instances, prices
from clusterkit.cluster.provision.planning import do_plan
from clusterkit.spec import load
from clusterkit.spec.doc import key_table

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# EC2's vCPU quotas (Service Quotas, service "Amazon Elastic Compute Cloud (Amazon EC2)"):
# quota class -> (instance family first letters, on-demand quota, spot quota).
QUOTAS: tuple[tuple[str, tuple[str, ...], str, str], ...] = (
    ("P", ("p",), "Running On-Demand P instances (L-417A185B)",
     "All P Spot Instance Requests (L-7212CCBC)"),
    ("G and VT", ("g", "vt"), "Running On-Demand G and VT instances (L-DB2E81BA)",
     "All G and VT Spot Instance Requests (L-3819A6DF)"),
    ("Standard", tuple("acdhimrtz"),
     "Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances (L-1216C47A)",
     "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests (L-34B43A08)"),
)


def _quota(instance_type: str) -> tuple[str, str, str]:
    family = instance_type.split(".")[0]
    for name, letters, on_demand, spot in QUOTAS:
        if family.startswith(letters) and not family.startswith("inf"):
            return name, on_demand, spot
    raise SystemExit(f"readme.py: no vCPU quota class known for {instance_type}: add it "
                     "to QUOTAS")


def quota_lines(spec_file: Path) -> list[str]:
    """The vCPU quotas the example needs in its region: count x the largest candidate of
    each quota class, for each market it may launch in."""
    spec = load(str(spec_file))
    markets = {"spot": ("spot",), "on-demand": ("on-demand",),
               "spot-then-on-demand": ("spot", "on-demand")}[spec.nodes.market]
    need: dict[str, int] = {}
    for name in spec.nodes.instance_types:
        info = instances.lookup(name)
        vcpus = spec.nodes.count * (info.vcpus if info else 0)
        _, on_demand, spot = _quota(name)
        for market in markets:
            quota = spot if market == "spot" else on_demand
            need[quota] = max(need.get(quota, 0), vcpus)
    return [f"{vcpus} vCPUs of *{quota}*" for quota, vcpus in need.items()]


def _row(spec_file: Path) -> str:
    spec = load(str(spec_file))
    plan = do_plan(str(spec_file), offline=True)
    choice = plan.choice
    on_demand = prices.on_demand_price(choice.instance_type, choice.region)
    worst = "" if on_demand is None or choice.market == "on-demand" else \
        f" (on-demand: ${spec.nodes.count * on_demand:.2f})"
    quotas = "; ".join(quota_lines(spec_file))
    return (f"| `examples/{spec_file.name}` | {spec.nodes.count} x {choice.instance_type} "
            f"{choice.market} in {choice.region} | ${plan.hourly_after():.2f}{worst} | "
            f"{quotas} |")


def example_costs() -> str:
    head = ("| example | nodes (offline plan) | $/h, instances | vCPU quotas to request "
            "(in its region) |\n|---|---|---|---|\n")
    return head + "\n".join(_row(path) for path in EXAMPLES) + "\n"


def iam_policy() -> str:
    path = ROOT / "scripts" / "iam_policy.py"
    spec = importlib.util.spec_from_file_location("iam_policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return "```json\n" + module.render() + "```\n"


def _tools_by_how() -> dict[str, list[tuple[str, str]]]:
    """scripts/tools.txt as how -> [(command, package)], in the list's order."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for line in (ROOT / "scripts/tools.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            command, how, package = line.split()[:3]
            grouped.setdefault(how, []).append((command, package))
    return grouped


def install_tools() -> str:
    """One sentence: what scripts/install.sh installs, from scripts/tools.txt."""
    grouped = _tools_by_how()
    packages = ", ".join(f"`{p}`" for p in dict.fromkeys(p for _c, p in grouped["apt"]))
    wheels = ", ".join(f"`{c}`" + (f" (the `{p}` wheel)" if p != c else "")
                       for c, p in grouped["pip"])
    optional = ", ".join(f"`{c}`" for c, _p in grouped.get("optional", []))
    venvs = ", ".join(f"`{p}`" for _c, p in grouped.get("venv", []))
    return ("Both install with `scripts/install.sh`, from the one list in `scripts/tools.txt`: "
            f"`apt-get install` of whichever of these OS packages are missing ({packages}, "
            "and `python3-venv` where `venv` is missing), then a virtual environment in "
            "`.venv` with `uv pip install -e '.[mxnet,charts,test]' -e ./sandbox` (uv is "
            "pip-installed there first: it installs the same versions in a third of pip's "
            "time; `./sandbox` is the sandbox, a package of its own that the test extra "
            "names), which brings the test tools "
            f"{wheels}, and a virtual environment of its own for {venvs} (a CPU build, for "
            "the torchrun tests; see [What the tests need](#what-the-tests-need)); it ends "
            "by checking that every listed tool is there. Used where present, never "
            f"installed: {optional}.\n")


ROUND_TRIP_NAMES = {"describe": "API round trip: a read (`Describe*`, `List*`, `Get*`, `Head*`)",
                    "mutate": "API round trip: any other call",
                    "run_instances": "API round trip: `RunInstances`"}


def _seconds(value: float) -> str:
    return f"{round(value, 4):g} s"


def sandbox_timings() -> str:
    """The timed sandbox's table: each figure as AWS takes it, as the sandbox takes it at
    the default scale, and its source."""
    from clusterkit_sandbox.timings import DEFAULT_SCALE, ROUND_TRIPS, WAITS

    head = (f"| wait | AWS | sandbox (`--timings aws`: x {DEFAULT_SCALE:g}) | source |\n"
            "|---|---|---|---|\n")
    rows = [(ROUND_TRIP_NAMES.get(name, name), fig) for name, fig in ROUND_TRIPS.items()]
    rows += [(wait.value, fig) for wait, fig in WAITS.items()]
    return head + "".join(f"| {what} | {_seconds(fig.seconds)} | "
                          f"{_seconds(fig.seconds * DEFAULT_SCALE)} | {fig.source} |\n"
                          for what, fig in rows)


PARTS: dict[str, Callable[[], str]] = {
    "spec-keys": key_table,
    "example-costs": example_costs,
    "iam-policy": iam_policy,
    "install-tools": install_tools,
    "sandbox-timings": sandbox_timings,
}


def regenerate(text: str) -> str:
    """``text`` with every generated part replaced by what the code says today."""
    for name, make in PARTS.items():
        begin, end = f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"
        pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
        if len(pattern.findall(text)) != 1:
            raise SystemExit(f"readme.py: README.md needs one {begin.strip()} ... {end}")
        body = make()
        replacement = begin + body + end
        text = pattern.sub(lambda _m, r=replacement: r, text)
    return text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true")
    group.add_argument("--check", action="store_true")
    args = parser.parse_args(argv)
    text = README.read_text()
    fresh = regenerate(text)
    if args.write:
        README.write_text(fresh)
    elif fresh != text:
        print("README.md is stale: run python scripts/readme.py --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

