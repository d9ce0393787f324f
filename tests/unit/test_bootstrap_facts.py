"""Node facts as data (pyinfra's tests/facts/ form): every bootstrap_facts/*.json holds a
fact name, the command its output was captured with, where it comes from, the output
lines and the parsed fact (``fact_value``; by-id cases also list ``instance_store``, the
disks scratch would use). A case whose source is a capture must hold that capture
verbatim; synthesized cases say so (and why) in ``source``."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from clusterkit.bootstrap import efa, efa_facts
from clusterkit.bootstrap import facts as nf

CASES = sorted((Path(__file__).parent / "bootstrap_facts").glob("*.json"))
# copies of ../shared/data/node-captures (tests/unit/test_data_captures.py checks them)
CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"
SHARED_PREFIX = "../shared/data/node-captures/"


def plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return value


def load(path: Path) -> dict[str, Any]:
    case = json.loads(path.read_text())
    missing = {"fact", "command", "source", "output", "fact_value"} - set(case)
    assert not missing, f"{path.name}: missing {sorted(missing)}"
    assert case["fact"] in nf.BY_NAME, f"{path.name}: no fact {case['fact']!r}"
    return case


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_fact_parses_to_expected(path: Path):
    case = load(path)
    fact = nf.BY_NAME[case["fact"]]
    parsed = fact.parse(case["output"])
    assert plain(parsed) == case["fact_value"]
    if "instance_store" in case:
        assert [d.name for d in nf.instance_store_disks(parsed)] == case["instance_store"]
        assert not any(d.ebs for d in nf.instance_store_disks(parsed))


def _captured(path: Path) -> bool:
    return not load(path)["source"].startswith("SYNTHESIZED")


CAPTURED_CASES = [p for p in CASES if _captured(p)]


@pytest.mark.parametrize("path", CAPTURED_CASES, ids=lambda p: p.stem)
def test_capture_cases_are_verbatim(path: Path):
    case = load(path)
    source = case["source"].split()[0]
    assert source.startswith(SHARED_PREFIX), f"{path.name}: source {source!r}"
    capture = CAPTURES / source.removeprefix(SHARED_PREFIX)
    assert capture.is_file(), f"{path.name}: no copy of {source} in {CAPTURES}"
    assert capture.read_text().rstrip("\n").split("\n") == case["output"]


def test_every_case_is_a_capture_or_says_it_is_synthesized():
    assert len(CAPTURED_CASES) >= 19
    for path in set(CASES) - set(CAPTURED_CASES):
        assert load(path)["source"].startswith("SYNTHESIZED"), path.name


def test_every_fact_has_a_case():
    covered = {load(p)["fact"] for p in CASES}
    assert covered == set(nf.BY_NAME), set(nf.BY_NAME) - covered


def test_the_families_the_issue_names_are_covered():
    by_id = {p.stem: load(p) for p in CASES if load(p)["fact"] == "disks_by_id"}
    counts = {name: len(case["instance_store"]) for name, case in by_id.items()}
    assert counts["by-id-p4d.24xlarge-eight-instance-store"] == 8
    assert counts["by-id-g5.12xlarge-one-instance-store"] == 1
    assert counts["by-id-i3-two-instance-store"] == 2
    assert counts["by-id-p3.16xlarge-none"] == 0
    assert counts["by-id-nitro-ebs-only-none"] == 0


def test_failed_or_empty_command_gives_the_default():
    for fact in nf.ALL:
        assert fact.parse(None) == fact.default
        assert fact.parse(["", "  "]) == fact.default


def test_a_fact_not_gathered_fails_loudly():
    facts = nf.from_outputs({"hostname": ["ip-10-0-1-5"]})
    assert facts.get(nf.HOSTNAME) == "ip-10-0-1-5"
    with pytest.raises(nf.FactNotGathered, match="mounts"):
        facts.get(nf.MOUNTS)


def test_gather_script_round_trip_on_this_machine():
    """The one-round-trip script runs in a POSIX shell here and every fact comes back
    (parsed, or its default where this machine lacks the tool or the file)."""
    out = subprocess.run(["sh", "-c", nf.gather_script()], capture_output=True, text=True,
                         timeout=60)
    facts = nf.parse_gathered(out.stdout.splitlines())
    assert set(facts.values) == set(nf.BY_NAME)
    assert facts.get(nf.HOSTNAME)
    assert facts.get(nf.BOOT_ID)


def test_python_env_script_reads_envs_without_python(tmp_path):
    """The env fact is plain shell (no interpreter start): complete and partial envs, the
    `current` link, and names that are not hashes left out."""
    base = tmp_path / "envs"
    for name, marker in (("5f1b7a7d", "5f1b7a7d\n"), ("9a0e3c2b", None), ("bad name", "x")):
        (base / name / "bin").mkdir(parents=True)
        (base / name / "bin" / "python").touch()
        if marker is not None:
            (base / name / nf.ENV_MARKER).write_text(marker)
    (base / "current").symlink_to(base / "5f1b7a7d")
    script = nf.PYTHON_ENV.command.replace(nf.ENVS_DIR, str(base))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
    env = nf.parse_python_env(out.stdout.splitlines())
    assert env.current == str(base / "5f1b7a7d")
    assert [(v.path, v.packages_hash, v.python) for v in env.venvs] == [
        (str(base / "5f1b7a7d"), "5f1b7a7d", True), (str(base / "9a0e3c2b"), None, True)]
    assert env.complete("5f1b7a7d") and not env.complete("9a0e3c2b")


def test_parse_gathered_failed_section_is_default():
    lines = [f"{nf.BEGIN} hostname", "node-a", f"{nf.END} hostname 0",
             f"{nf.BEGIN} mounts", "garbage", f"{nf.END} mounts 1"]
    facts = nf.parse_gathered(lines, (nf.HOSTNAME, nf.MOUNTS, nf.RECEIPTS))
    assert facts.get(nf.HOSTNAME) == "node-a"
    assert facts.get(nf.MOUNTS) == ()
    assert facts.get(nf.RECEIPTS) == {}  # section missing: the default


def test_efa_facts_without_efa_software_are_their_defaults_not_errors(tmp_path: Path):
    """No fi_info on the image, no nvidia-smi (as on the sandbox's nodes, which have no
    EFA): those facts are their defaults and the gather goes on. The PATH holds only the
    tools the other commands need, so this holds on any machine without the installer."""
    if Path(efa_facts.EFA_BIN, "fi_info").exists():
        pytest.skip("this machine has the EFA installer's fi_info")
    for tool in ("cat", "ls", "sha256sum", "stat", "timeout"):
        (tmp_path / tool).symlink_to(next(Path(d, tool) for d in ("/usr/bin", "/bin")
                                          if Path(d, tool).exists()))
    out = subprocess.run(["/bin/sh", "-c", nf.gather_script(efa_facts.EFA_FACTS)],
                         capture_output=True, text=True, timeout=60,
                         env={"PATH": str(tmp_path)})
    facts = nf.parse_gathered(out.stdout.splitlines(), efa_facts.EFA_FACTS)
    assert set(facts.values) == {f.name for f in efa_facts.EFA_FACTS}
    assert facts.get(efa_facts.FI_INFO) == efa_facts.FI_INFO.default
    assert facts.get(efa_facts.NVIDIA_SMI) == efa_facts.NVIDIA_SMI.default
    got = efa_facts.efa_facts(facts)
    assert (got.provider, got.efa_devices, got.driver_version) == (False, 0, None)


def test_nccl_libs_counts_the_listing_when_some_globs_match_nothing():
    """``ls`` of several globs exits 2 when one matches nothing; the fact still reads
    the files it listed (``ls`` stood in for by a shell function)."""
    stand_in = ("ls() { echo /usr/lib/x86_64-linux-gnu/libnccl.so.2.18.5; "
                "echo 'ls: cannot access ...' >&2; return 2; }\n")
    script = stand_in + nf.gather_script((efa_facts.NCCL_LIBS,))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=30)
    facts = nf.parse_gathered(out.stdout.splitlines(), (efa_facts.NCCL_LIBS,))
    assert facts.get(efa_facts.NCCL_LIBS) == "2.18.5"


def test_efa_profile_fact_reads_a_written_file(tmp_path: Path):
    profile = tmp_path / "clusterkit-efa.sh"
    profile.write_text("export FI_PROVIDER=efa\n")
    profile.chmod(0o644)
    command = efa_facts.EFA_PROFILE.command.replace(efa.PROFILE_PATH, str(profile))
    out = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True)
    assert efa_facts.EFA_PROFILE.parse(out.stdout.splitlines()) == efa_facts.ProfileFile(
        hashlib.sha256(b"export FI_PROVIDER=efa\n").hexdigest(), "644")
    missing = subprocess.run(["sh", "-c", command.replace(str(profile), str(tmp_path / "no"))],
                             capture_output=True, text=True)
    assert missing.returncode != 0  # the gather records it: the default, None
