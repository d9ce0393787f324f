"""training/diagnose.py as data (tests/unit/diagnose_cases: a context, the nodes' metric
windows and optional health text in; the findings out), and node/gpuhealth.py against
the real captures (tests/data/node-captures: verbatim copies of
../shared/data/node-captures/). The cases' windows are generated with realistic numbers; their health
texts are lines of the captures their ``source`` names, verbatim."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from clusterkit.node import gpuhealth
from clusterkit.training import diagnose as dg

CASES = sorted((Path(__file__).parent / "diagnose_cases").glob("*.json"))
CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"  # copies of ../shared/data


def context(case: dict) -> dg.Context:
    health = {int(node): dg.NodeHealth(h.get("smi_q"), h.get("kernel_log"))
              for node, h in case.get("health", {}).items()}
    return dg.Context(**case["context"], health=health)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_diagnose_cases(path: Path):
    case = json.loads(path.read_text())
    got = [f.to_json() for f in dg.diagnose(case["windows"], context(case))]
    assert [(f["kind"], f["nodes"]) for f in got] == \
        [(e["kind"], e["nodes"]) for e in case["expect"]], (case["doc"], got)
    for finding, expect in zip(got, case["expect"], strict=True):
        assert "\n" not in finding["evidence"] and "\n" not in finding["fix"]
        for part in expect["evidence_contains"]:
            assert part in finding["evidence"], (part, finding["evidence"])
        for part in expect["fix_contains"]:
            assert part in finding["fix"], (part, finding["fix"])
        assert finding["severity"] == expect.get("severity", finding["severity"])


def test_every_kind_has_a_case():
    kinds = {e["kind"] for p in CASES for e in json.loads(p.read_text())["expect"]}
    assert kinds == {k.value for k in dg.Kind}


def _capture(name: str) -> str:
    return (CAPTURES / name).read_text()


def test_case_health_texts_are_lines_of_their_captures():
    for path in CASES:
        for node in json.loads(path.read_text()).get("health", {}).values():
            lines = {line for name in node["source"].split() for line in
                     _capture(name).splitlines()}
            for text in (node.get("kernel_log"), node.get("smi_q")):
                assert set((text or "").splitlines()) <= lines, path.name


@pytest.mark.parametrize(("name", "expect"), [
    ("xid-63-64.sagemaker-a100-80gb.txt", [(63, "0000:10:1c"), (64, "0000:90:1c")]),
    ("xid-48-64.onprem-UNSTATED.syslog.txt", [(48, "0000:07:00"), (64, "0000:07:00")]),
    ("xid-43-31-94.dmesg-T.driver-535.TRUNCATED.txt",
     [(43, "0000:00:05"), (31, "0000:00:07"), (94, "0000:00:08")]),
    ("xid-13-109.dmesg-T.TRUNCATED.txt", [(13, "0000:cb:00"), (109, "0000:cb:00")]),
    ("gpu-fallen-off-bus.dmesg.driver-570.txt", [(79, "0000:b3:00.0")]),
])
def test_parse_xids_on_the_captures(name: str, expect: list):
    found = dg.parse_xids(_capture(name))
    assert [(xid, pci) for xid, pci, _line in found] == expect
    assert all("NVRM" in line for _x, _p, line in found)


def test_fallen_off_the_bus_is_one_xid_79_with_its_whole_message():
    [(_xid, _pci, line)] = dg.parse_xids(_capture("gpu-fallen-off-bus.dmesg.driver-570.txt"))
    assert line.startswith("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0")
    assert line.endswith("fallen off the bus and is not responding to commands.")


def test_xid_forms_without_pci_prefix_or_number():
    text = ("NVRM: Xid (0000:03:00): 79, GPU has fallen off the bus.\n"  # older drivers
            "NVRM: GPU has fallen off the bus.\n")
    assert [(x, p) for x, p, _l in dg.parse_xids(text)] == [(79, "0000:03:00"), (79, None)]
    assert dg.parse_xids("kernel: eth0: link up\n") == []
    assert gpuhealth.pci_key("00000000:B3:00.0") == gpuhealth.pci_key("0000:b3:00") == \
        "0000:b3:00"


def test_gpu_health_on_the_remapped_rows_capture():
    report = dg.gpu_health(_capture("a100-80gb.nvidia-smi-q.ecc-remapped-rows.TRUNCATED.txt"))
    assert report["driver_version"] == "510.73.08"
    assert report["attached_gpus"] == 8
    gpu = report["gpus"]["00000000:10:1C.0"]
    assert gpu["product"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["ecc_uncorrectable_volatile"] == 0  # 177 correctable, none uncorrectable
    assert gpu["ecc_uncorrectable_aggregate"] is None  # the capture cut that block
    assert gpu["remapped_rows_pending"] is True and gpu["remapping_failure"] is False
    assert report["problems"] == report["reset_only"] == [
        "GPU 00000000:10:1C.0: remapped rows pending (reset the GPU to apply them)"]


def test_gpu_health_counts_double_bit_totals_of_older_drivers():
    # SYNTHESIZED in the layout of pre-Ampere drivers (no capture of it here): Double Bit
    # rows under Volatile/Aggregate, each with a Total; only the Totals count.
    text = "\n".join([
        "Driver Version                      : 390.48",
        "GPU 00000000:00:1E.0",
        "    Product Name                    : Tesla V100-SXM2-16GB",
        "    ECC Errors",
        "        Volatile",
        "            Single Bit",
        "                Device Memory       : 4",
        "                Total               : 4",
        "            Double Bit",
        "                Device Memory       : 2",
        "                Register File       : 0",
        "                Total               : 2",
        "        Aggregate",
        "            Double Bit",
        "                Device Memory       : 3",
        "                Total               : 3",
        "    Retired Pages",
        "        Double Bit ECC              : 1",
        "        Pending Page Blacklist      : Yes",
    ])
    gpu = dg.gpu_health(text)["gpus"]["00000000:00:1E.0"]
    assert (gpu["ecc_uncorrectable_volatile"], gpu["ecc_uncorrectable_aggregate"]) == (2, 3)
    assert gpu["retired_pages_pending"] is True
    assert len(dg.gpu_health(text)["problems"]) == 3
    assert dg.gpu_health("") == {"driver_version": None, "attached_gpus": None, "gpus": {},
                                 "problems": [], "reset_only": []}


def test_fatal_xids_carry_the_catalog_rows():
    rows = {int(r.split(",")[0]): r.split(",")[1:4] for r in
            _capture("xid-catalog.nvidia.csv").splitlines()[1:]}
    for xid, info in gpuhealth.FATAL_XIDS.items():
        assert list(info) == rows[xid], xid
    assert {48, 63, 64, 74, 79, 94, 95} <= set(gpuhealth.FATAL_XIDS)


def test_modules_parse_as_python_3_8():
    for module in (dg, gpuhealth):
        ast.parse(Path(module.__file__).read_text(), feature_version=(3, 8))


def test_findings_serialise_and_thresholds_are_named():
    finding = dg.Finding(dg.Kind.STRAGGLER, (2,), "e", "f", dg.Severity.WARNING)
    assert json.loads(json.dumps(finding.to_json())) == {
        "kind": "straggler", "nodes": [2], "evidence": "e", "fix": "f", "severity": "warning"}
    assert (dg.GPU_UTIL_LOW, dg.CPU_SATURATED, dg.IOWAIT_HIGH, dg.READ_MS_HIGH) == \
        (70.0, 0.85, 15.0, 10.0)
    assert dg.diagnose({}, dg.Context("g5.2xlarge", 8, 1, 10.0)) == []
