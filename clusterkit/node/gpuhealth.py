"""GPU health from text a node already has: NVIDIA XID lines in the kernel log (``dmesg``,
``dmesg -T``, ``journalctl -k``, syslog) and ``nvidia-smi -q`` (ECC errors, retired pages,
remapped rows). Pure parsing: no I/O, stdlib only, Python >= 3.8 (it may run on a node).

Parsed against real captures (shared/data/node-captures: xid-*.txt,
gpu-fallen-off-bus.dmesg.driver-570.txt, a100-80gb.nvidia-smi-q.ecc-remapped-rows...).
The XID meanings are NVIDIA's XID catalog rows (xid-catalog.nvidia.csv, from
https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html).
"""

from __future__ import annotations

import re
from typing import NamedTuple


class XidInfo(NamedTuple):
    mnemonic: str  # the catalog's name for it
    meaning: str  # the catalog's description
    action: str  # the catalog's immediate action


# XIDs after which the GPU (and so the node) cannot be trusted with the job: NVIDIA's
# catalog rows, verbatim. 63 asks for a GPU reset before the remapped row takes effect;
# 94 is contained to one context, but on a synchronous job that context is the job.
FATAL_XIDS: dict[int, XidInfo] = {
    48: XidInfo("ROBUST_CHANNEL_GPU_ECC_DBE", "Double Bit ECC Error", "WORKFLOW_XID_48"),
    63: XidInfo("INFOROM_DRAM_RETIREMENT_EVENT", "GPU memory remapping event", "IGNORE"),
    64: XidInfo("INFOROM_DRAM_RETIREMENT_FAILURE", "GPU memory remapping failure",
                "RESET_GPU"),
    74: XidInfo("NVLINK_ERROR", "NVLINK Error", "WORKFLOW_NVLINK_ERR"),
    79: XidInfo("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus",
                "RESTART_BM"),
    94: XidInfo("ROBUST_CHANNEL_CONTAINED_ERROR", "Contained memory error", "RESTART_APP"),
    95: XidInfo("ROBUST_CHANNEL_UNCONTAINED_ERROR", "Uncontained memory error", "RESET_GPU"),
}

# The node's GPU is fine after these; a reset applies the fix (rows remapped on the next
# reset): worth a warning, not a lost node.
RESET_PENDING_XIDS = frozenset({63})

FALLEN_OFF_XID = 79  # the kernel's "fallen off the bus" text is Xid 79 without a number

# "NVRM: Xid (PCI:0000:10:1c): 63, pid=..." (older drivers: "Xid (0000:03:00): 79, ...")
_XID = re.compile(r"\bXid\s*\((?:PCI:)?\s*([^)]*?)\s*\)\s*:\s*(\d+)")
_PCI = re.compile(r"\b([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-7])?)\b")
_FALLEN = re.compile(r"fallen\s+off\s+the\s+bus", re.IGNORECASE)
_LOOKBACK = 3  # lines above a "fallen off the bus" line that may name its GPU


def parse_xids(text: str) -> list[tuple[int, str | None, str]]:
    """Every XID the kernel logged, in order: (xid, PCI address as the log wrote it or
    None, the line). A "fallen off the bus" message without an Xid number (the kernel
    spreads it over up to three lines) is Xid 79; its line is that message joined."""
    found: list[tuple[int, str | None, str]] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        match = _XID.search(line)
        if match:
            found.append((int(match.group(2)), match.group(1) or None, line.strip()))
        elif _FALLEN.search(line):
            found.append(_fallen_off(lines, i))
    return found


def _fallen_off(lines: list[str], i: int) -> tuple[int, str | None, str]:
    for back in range(i, max(-1, i - _LOOKBACK - 1), -1):
        pci = _PCI.search(lines[back])
        if back < i and ("NVRM:" not in lines[back] or _XID.search(lines[back])):
            break  # not a line of the same message
        if pci:
            block = " ".join(part.strip() for part in lines[back:i + 1])
            return FALLEN_OFF_XID, pci.group(1), block
    return FALLEN_OFF_XID, None, lines[i].strip()


def pci_key(pci: str | None) -> str | None:
    """One spelling of a PCI address for comparing: ``0000:b3:00.0``, ``00000000:B3:00.0``
    and ``PCI:0000:b3:00`` are the same GPU."""
    if not pci:
        return None
    match = _PCI.search(pci)
    if not match:
        return pci.lower()
    domain, bus, dev = match.group(1).split(".")[0].lower().split(":")
    return f"{int(domain, 16):04x}:{bus}:{dev}"


def gpu_health(smi_q_text: str) -> dict:
    """``nvidia-smi -q`` read for what makes a GPU unfit: per GPU (keyed by its bus id as
    printed) the uncorrectable ECC counts (Volatile and Aggregate: the newer
    "SRAM/DRAM Uncorrectable" rows, or the older "Double Bit" ... "Total"), remapped rows
    pending and remapping failures, and retired pages pending. ``problems`` lists one line
    per finding, ``reset_only`` those a GPU reset clears (pending remaps). Values the
    text does not show are None."""
    gpus: dict[str, dict] = {}
    head: dict[str, str | None] = {"driver_version": None, "attached_gpus": None}
    gpu: dict | None = None
    stack: list[tuple[int, str]] = []
    for raw in smi_q_text.splitlines():
        text = raw.strip()
        if not text or text.startswith("[") or text == "...":
            continue
        indent = len(raw) - len(raw.lstrip())
        while stack and stack[-1][0] >= indent:
            stack.pop()
        key, sep, value = (part.strip() for part in text.partition(":"))
        if indent == 0 and text.startswith("GPU "):
            gpu = gpus.setdefault(text[4:].strip(), _blank_gpu())
            stack = [(0, "GPU")]
        elif not sep:
            stack.append((indent, text))
        elif gpu is None:
            _header(head, key, value)
        else:
            _gpu_row(gpu, [s for _i, s in stack[1:]], key, value)
    problems, reset_only = _problems(gpus)
    return {"driver_version": head["driver_version"],
            "attached_gpus": int(head["attached_gpus"]) if head["attached_gpus"] else None,
            "gpus": gpus, "problems": problems, "reset_only": reset_only}


def _blank_gpu() -> dict:
    return {"product": None, "ecc_uncorrectable_volatile": None,
            "ecc_uncorrectable_aggregate": None, "remapped_rows_pending": None,
            "remapping_failure": None, "retired_pages_pending": None}


def _header(head: dict[str, str | None], key: str, value: str) -> None:
    if key == "Driver Version":
        head["driver_version"] = value
    elif key == "Attached GPUs":
        head["attached_gpus"] = value if value.isdigit() else None


def _gpu_row(gpu: dict, path: list[str], key: str, value: str) -> None:
    flag = {"yes": True, "no": False}.get(value.lower())
    if key == "Product Name":
        gpu["product"] = value
    elif path[:1] == ["ECC Errors"] and len(path) >= 2 and value.isdigit():
        scope = {"Volatile": "volatile", "Aggregate": "aggregate"}.get(path[1])
        in_double = "Double Bit" in path[2:]  # older drivers: Double Bit > ... > Total
        counted = key == "Total" if in_double else "Uncorrectable" in key
        if scope and counted:
            name = "ecc_uncorrectable_" + scope
            gpu[name] = (gpu[name] or 0) + int(value)
    elif path[:1] == ["Remapped Rows"] and key == "Pending":
        gpu["remapped_rows_pending"] = flag
    elif path[:1] == ["Remapped Rows"] and key == "Remapping Failure Occurred":
        gpu["remapping_failure"] = flag
    elif path[:1] == ["Retired Pages"] and key.startswith("Pending Page"):
        gpu["retired_pages_pending"] = flag


def _problems(gpus: dict[str, dict]) -> tuple[list[str], list[str]]:
    problems: list[str] = []
    reset_only: list[str] = []
    for bus, g in gpus.items():
        for scope in ("volatile", "aggregate"):
            count = g["ecc_uncorrectable_" + scope]
            if count:
                problems.append(f"GPU {bus}: {count} uncorrectable ECC error(s) ({scope})")
        if g["remapping_failure"]:
            problems.append(f"GPU {bus}: row remapping failed")
        if g["retired_pages_pending"]:
            problems.append(f"GPU {bus}: page retirement pending (reset the GPU)")
        if g["remapped_rows_pending"]:
            line = f"GPU {bus}: remapped rows pending (reset the GPU to apply them)"
            problems.append(line)
            reset_only.append(line)
    return problems, reset_only


def problems(kernel_log: str, smi_q: str, reported: int | None = None,
             expected: int = 0) -> list[tuple[str, str, bool]]:
    """What makes a node's GPUs unfit: (evidence, meaning, reset_only) for fewer GPUs
    ``reported`` by nvidia-smi than the type has (``expected``), per fatal XID in its
    kernel log (once per GPU; one without a PCI address only when no named line says it),
    and per ``gpu_health`` problem of its ``nvidia-smi -q``."""
    found: list[tuple[str, str, bool]] = []
    if reported is not None and reported < expected:
        found.append((f"{reported} of {expected} GPUs reported by nvidia-smi",
                      "a GPU is missing", False))
    xids = [(x, pci_key(p), p) for x, p, _l in parse_xids(kernel_log)]
    seen = set()
    for xid, key, pci in xids:
        info = FATAL_XIDS.get(xid)
        named = key is None and any(x == xid and k for x, k, _p in xids)
        if info is None or (xid, key) in seen or named:
            continue
        seen.add((xid, key))
        found.append((f"Xid {xid} {info.mnemonic} on {pci or 'an unnamed GPU'}",
                      f"Xid {xid} = {info.meaning}", xid in RESET_PENDING_XIDS))
    report = gpu_health(smi_q)
    for line in report["problems"]:
        found.append((line, line.split(": ", 1)[1], line in report["reset_only"]))
    return found
