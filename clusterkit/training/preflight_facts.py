"""What `train --preflight` reads on each node, as node facts (``bootstrap/nodefact.py``:
a command, a pure parser of its output, a default for "failed or printed nothing"),
gathered in one SSH round trip per node (``bootstrap.facts.gather_script``), as root.
PURE: commands are text; the parsers take lines and return data.

- ``SMI_Q``: ``nvidia-smi -q`` (``node/gpuhealth.gpu_health`` reads it, as the GPU
  watcher does). Default None: no nvidia-smi (a CPU node), or it failed or hung (bounded
  by ``timeout``: a GPU fallen off the bus can hang it).
- ``KERNEL_GPU_LINES``: the kernel log's GPU lines since boot (``dmesg``, else
  ``journalctl -k -b``), the same lines the watcher keeps (``node/gpuwatch.GPU_LINE``).
- ``DCGM``: ``dcgmi diag -r 1`` (DCGM's quick run: deployment and software checks, a
  few seconds), parsed by ``parse_dcgmi``. Default None: DCGM is not installed.
- ``FI_INFO``: the EFA devices libfabric opens (``bootstrap/efa_facts.FI_INFO``).
- ``dataset_read(mount)``: a short direct read (``dd``, 256 MiB, O_DIRECT, at most 60 s)
  of the device mounted at the dataset's mount point, parsed by ``parse_dd``. Default
  None: nothing is mounted there.
- ``torch_fact(python)``: whether the job's interpreter imports torch (the all-reduce
  test runs under torchrun). Default False.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clusterkit.bootstrap.efa_facts import FI_INFO
from clusterkit.bootstrap.facts import BEGIN, END, gather_script, sections
from clusterkit.bootstrap.nodefact import NodeFact, NodeFacts

SMI_TIMEOUT_S = 30  # `nvidia-smi -q` of 8 GPUs takes a second or two
DCGM_TIMEOUT_S = 300  # `dcgmi diag -r 1` takes seconds; never wait on a hung one
READ_MIB = 256  # the dataset read: enough to leave the volume's burst and cache behind
READ_TIMEOUT_S = 60  # a lazily loading clone may read at a few MiB/s: stop and measure
NOT_THERE = 3  # the exit code a fact's command uses for "no such tool / nothing mounted"
# the kernel log's GPU lines and how many are kept: node/gpuwatch.py's GPU_LINE and
# KEEP_LINES (that module runs processes, so a pure one does not import it; a test holds
# the two equal)
GPU_LINE = ("NVRM", "Xid", "fallen off the bus")
KEEP_LINES = 200


def _text(lines: list[str]) -> str:
    return "\n".join(lines)


SMI_Q: NodeFact[str | None] = NodeFact("smi_q", f"timeout {SMI_TIMEOUT_S} nvidia-smi -q",
                                       _text, None)
_GREP = "|".join(GPU_LINE)
KERNEL_GPU_LINES: NodeFact[str] = NodeFact(
    "kernel_gpu_lines",
    f"{{ dmesg 2>/dev/null || journalctl -k -b -q --no-pager 2>/dev/null; }} "
    f"| grep -E '{_GREP}' | tail -n {KEEP_LINES}; true", _text, "")


@dataclass(frozen=True)
class DcgmDiag:
    """``dcgmi diag``'s table: each test (row name) and its result cells joined."""

    results: tuple[tuple[str, str], ...]
    first_line: str = ""  # what it printed first (an error, when there is no table)

    @property
    def failures(self) -> tuple[str, ...]:
        """Each row that failed or reported an error, as ``name: result``."""
        return tuple(f"{name}: {_failed_part(result)}" for name, result in self.results
                     if name.lower() in ("error", "warning") or "fail" in result.lower())

    @property
    def passed(self) -> int:
        return sum(1 for _n, r in self.results if r.lower().startswith("pass"))


_ROW = re.compile(r"^\|(?P<name>[^|]*)\|(?P<result>[^|]*)\|\s*$")


def _failed_part(result: str) -> str:
    parts = [p for p in result.split("; ") if "fail" in p.lower()]
    return "; ".join(parts) or result


def parse_dcgmi(lines: list[str]) -> DcgmDiag:
    """``dcgmi diag -r N`` -> its rows. A row whose first cell is empty continues the
    one above (DCGM wraps long results); section rules (``|----- Deployment ---|``) and
    the header (``Diagnostic | Result``) are not rows."""
    rows: list[tuple[str, list[str]]] = []
    for line in lines:
        match = _ROW.match(line.strip())
        if match is None or line.strip().startswith("|-"):
            continue
        name, result = match.group("name").strip(), match.group("result").strip()
        if name == "Diagnostic" and result == "Result":
            continue
        if name:
            rows.append((name, [result] if result else []))
        elif rows and result:
            rows[-1][1].append(result)
    first = next((line.strip() for line in lines if line.strip()), "")
    return DcgmDiag(tuple((n, _join(parts)) for n, parts in rows), first)


def _join(parts: list[str]) -> str:
    """Wrapped cells joined: a sentence cut mid-way continues with a space, a new
    ``Pass``/``Fail`` line after ``; ``."""
    text = ""
    for part in parts:
        if not text:
            text = part
        elif re.match(r"^(Pass|Fail|Skip|Warn)", part):
            text += "; " + part
        else:
            text += " " + part
    return text


DCGM: NodeFact[DcgmDiag | None] = NodeFact(
    "dcgmi", f"command -v dcgmi >/dev/null 2>&1 || exit {NOT_THERE}; "
    f"timeout {DCGM_TIMEOUT_S} dcgmi diag -r 1 2>&1; true", parse_dcgmi, None)


@dataclass(frozen=True)
class DatasetRead:
    """``dd``'s last line: the bytes it read and in how long (None when it printed an
    error instead), and the device it read."""

    line: str
    device: str | None
    bytes: int | None
    seconds: float | None

    @property
    def mib_s(self) -> float | None:
        if not self.bytes or not self.seconds:
            return None
        return self.bytes / self.seconds / (1 << 20)


# GNU dd: "268435456 bytes (268 MB, 256 MiB) copied, 1.23456 s, 217 MB/s" (older: "(268
# MB) copied"); busybox prints other lines, which give no rate
_DD = re.compile(r"^(\d+) bytes\b.*\bcopied, ([0-9.]+(?:e[-+]?\d+)?) s\b")


def parse_dd(lines: list[str]) -> DatasetRead:
    """The device line (``device /dev/...``) and dd's summary line -> DatasetRead."""
    device = next((line.split(None, 1)[1].strip() for line in lines
                   if line.startswith("device ") and len(line.split()) > 1), None)
    rest = [line.strip() for line in lines if line.strip() and not line.startswith("device ")]
    last = rest[-1] if rest else ""
    match = _DD.match(last)
    if match is None:
        return DatasetRead(last, device, None, None)
    return DatasetRead(last, device, int(match.group(1)), float(match.group(2)))


def dataset_read(mount: str) -> NodeFact[DatasetRead | None]:
    """The device mounted exactly at ``mount`` read for ``READ_MIB`` MiB with O_DIRECT
    (the page cache would answer a second read); SIGINT at the timeout makes dd print
    what it read so far."""
    where = shlex.quote(mount)
    command = (f"src=$(findmnt -n -o SOURCE --mountpoint {where}) || exit {NOT_THERE}; "
               f"echo \"device $src\"; timeout -s INT {READ_TIMEOUT_S} dd if=\"$src\" "
               f"of=/dev/null bs=1M count={READ_MIB} iflag=direct 2>&1 | tail -n 1")
    return NodeFact("dataset_read", command, parse_dd, None)


TORCH = "torch"


def torch_fact(python: Sequence[str]) -> NodeFact[bool]:
    """Whether the job's interpreter imports torch (prints ``torch``)."""
    argv = " ".join(shlex.quote(word) for word in python)
    return NodeFact(TORCH, f"{argv} -c 'import torch; print(\"torch\")'",
                    lambda lines: any(line.strip() == "torch" for line in lines), False)


def preflight_facts(dataset_mount: str | None,
                    python: Sequence[str]) -> tuple[NodeFact[Any], ...]:
    """Every fact the preflight gathers on a node (the dataset's only with a dataset)."""
    found: list[NodeFact[Any]] = [SMI_Q, KERNEL_GPU_LINES, DCGM, FI_INFO, torch_fact(python)]
    if dataset_mount is not None:
        found.append(dataset_read(dataset_mount))
    return tuple(found)


def gather(facts: Sequence[NodeFact[Any]]) -> str:
    """The facts gathered as root in one round trip (as bootstrap's are)."""
    script = shlex.quote(gather_script(facts))
    return f'if [ "$(id -u)" -eq 0 ]; then sh -c {script}; else sudo -n sh -c {script}; fi'


def has_torch(facts: NodeFacts) -> bool:
    """The node's ``torch_fact``, whatever interpreter it asked."""
    return bool(facts.values.get(TORCH))


def parse_node(lines: Sequence[str], facts: Sequence[NodeFact[Any]]) -> NodeFacts:
    """``gather``'s output -> the node's facts; a fact whose section is missing or whose
    command exited non-zero gets its default."""
    outputs: dict[str, list[str] | None] = {f.name: None for f in facts}
    for name, code, body in sections(lines, BEGIN, END):
        if name in outputs:
            outputs[name] = body if code == 0 else None
    return NodeFacts({f.name: f.parse(outputs[f.name]) for f in facts})
