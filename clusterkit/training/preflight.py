"""`train --preflight`'s verdicts: what each node's facts (``preflight_facts.py``) say
against what its instance type should have, and what the all-reduce across the nodes
measured against the type's nominal bandwidth. PURE: facts and expectations in,
verdicts out; the record the job's report keeps (``Preflight``) and its lines.

Per node, one verdict per check (``Check``), each PASS, WARN (said and kept, the node
stays), FAIL (the node is replaced while recoveries are left, else the job does not
start) or SKIPPED (nothing to check: a CPU type, no DCGM, no EFA, no dataset):

- gpus: ``nvidia-smi -q`` and the kernel log's Xid lines since boot, judged as the GPU
  watcher judges them (``node/gpuhealth.problems``): fewer GPUs than the type has, a
  fatal Xid, uncorrectable ECC errors, a failed or pending row remap, pending page
  retirement. Before a job even a pending remap fails: it needs a GPU reset first.
- dcgm: every ``dcgmi diag -r 1`` row that failed or reported an error.
- efa: the EFA devices fi_info opens against the interfaces the node was launched with.
- dataset: the volume's read rate against its provisioned throughput; a lazily loading
  clone (no initialization rate: blocks load from S3 on first read) is named (WARN).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from clusterkit.bootstrap.efa import FiInfo
from clusterkit.bootstrap.nodefact import NodeFacts
from clusterkit.node.gpuhealth import gpu_health, problems
from clusterkit.training import preflight_facts as pf
from clusterkit.training.allreduce import BandwidthVerdict, Looks


class Check(StrEnum):
    GPUS = "gpus"
    DCGM = "dcgm"
    EFA = "efa"
    DATASET = "dataset"
    ALL_REDUCE = "all_reduce"


class Status(StrEnum):
    PASS = "pass"
    WARN = "warn"  # said and kept in the report; the node stays
    FAIL = "fail"  # the node is replaced, or the job does not start
    SKIPPED = "skipped"  # nothing to check here


@dataclass(frozen=True)
class Verdict:
    check: Check
    status: Status
    evidence: str

    def to_json(self) -> dict[str, str]:
        return {"check": self.check.value, "status": self.status.value,
                "evidence": self.evidence}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Verdict:
        return cls(Check(data["check"]), Status(data["status"]), str(data["evidence"]))


@dataclass(frozen=True)
class Expect:
    """What a node of the cluster should have: the catalog's figures for its type, as
    the spec uses them."""

    instance_type: str
    gpus: int  # the catalog's GPU count (0: a CPU type)
    efa: int  # EFA interfaces the node was launched with (0: none, or network.efa false)
    efa_why_none: str = ""  # why ``efa`` is 0, for the SKIPPED line
    dataset_mount: str | None = None  # storage.dataset.mount (None: no dataset)
    dataset_mib_s: float = 125.0  # its provisioned throughput (gp3's baseline)
    lazy: bool = False  # a snapshot clone without an initialization rate


# A volume read under this share of its provisioned throughput is not healthy (a
# sequential 1 MiB direct read of gp3 at queue depth 1 reaches well over half of it).
MIN_READ_SHARE = 0.25


def judge_gpus(smi_q: str | None, kernel_lines: str, expect: Expect) -> Verdict:
    if smi_q is None and not expect.gpus:
        return Verdict(Check.GPUS, Status.SKIPPED, f"{expect.instance_type} has no GPU")
    if smi_q is None:
        return Verdict(Check.GPUS, Status.FAIL, f"nvidia-smi -q did not answer "
                       f"({expect.gpus} GPU(s) expected on {expect.instance_type})")
    health = gpu_health(smi_q)
    reported = health["attached_gpus"] if health["attached_gpus"] is not None \
        else len(health["gpus"])
    found = problems(kernel_lines, smi_q, reported, expect.gpus)
    if found:
        return Verdict(Check.GPUS, Status.FAIL, "; ".join(e for e, _m, _r in found))
    of = f" of {expect.gpus}" if expect.gpus else ""
    return Verdict(Check.GPUS, Status.PASS, f"{reported}{of} GPU(s), no uncorrectable ECC "
                   "error, no pending row remap, no fatal Xid since boot")


def judge_dcgm(diag: pf.DcgmDiag | None) -> Verdict:
    if diag is None:
        return Verdict(Check.DCGM, Status.SKIPPED, "DCGM is not installed (no dcgmi)")
    if diag.failures:
        return Verdict(Check.DCGM, Status.FAIL, "dcgmi diag -r 1: " + "; ".join(diag.failures))
    if not diag.results:
        return Verdict(Check.DCGM, Status.WARN, "dcgmi diag -r 1 printed no results: "
                       + (diag.first_line or "nothing"))
    return Verdict(Check.DCGM, Status.PASS, f"dcgmi diag -r 1: {diag.passed} test(s) passed")


def judge_efa(fi_info: FiInfo, expect: Expect) -> Verdict:
    if not expect.efa:
        return Verdict(Check.EFA, Status.SKIPPED, expect.efa_why_none or
                       f"{expect.instance_type} has no EFA")
    devices = sorted({e.device or e.fabric or "?" for e in fi_info.efa})
    seen = f" ({', '.join(devices)})" if devices else ""
    if len(devices) < expect.efa:
        why = f"; {fi_info.error}" if fi_info.error else ""
        return Verdict(Check.EFA, Status.FAIL, f"fi_info -p efa opens {len(devices)} of the "
                       f"{expect.efa} EFA interfaces{seen}{why}")
    return Verdict(Check.EFA, Status.PASS, f"{len(devices)} of {expect.efa} EFA "
                   f"interfaces{seen}")


LAZY_WORDS = ("a lazily loading clone (made without an initialization rate, no fast "
              "snapshot restore): blocks not yet read load from S3 on first read; "
              "`clusterkit deploy-dataset --prewarm` or storage.dataset.initialization_rate")


def judge_dataset(read: pf.DatasetRead | None, expect: Expect) -> Verdict:
    mount = expect.dataset_mount
    if mount is None:
        return Verdict(Check.DATASET, Status.SKIPPED, "no storage.dataset")
    if read is None:
        return Verdict(Check.DATASET, Status.FAIL, f"nothing is mounted at {mount}")
    rate = read.mib_s
    if rate is None:
        return Verdict(Check.DATASET, Status.FAIL, f"{read.device or mount} could not be "
                       f"read: {read.line or 'dd printed nothing'}")
    said = (f"{read.device or mount} read at {rate:.0f} MiB/s "
            f"({expect.dataset_mib_s:g} MiB/s provisioned)")
    if expect.lazy:
        return Verdict(Check.DATASET, Status.WARN, f"{said}: {LAZY_WORDS}")
    if rate < MIN_READ_SHARE * expect.dataset_mib_s:
        return Verdict(Check.DATASET, Status.FAIL, f"{said}: under "
                       f"{MIN_READ_SHARE:.0%} of it")
    return Verdict(Check.DATASET, Status.PASS, said)


def judge_node(facts: NodeFacts, expect: Expect) -> tuple[Verdict, ...]:
    """Every check of one node from its gathered facts."""
    verdicts = [judge_gpus(facts.get(pf.SMI_Q), facts.get(pf.KERNEL_GPU_LINES), expect),
                judge_dcgm(facts.get(pf.DCGM)), judge_efa(facts.get(pf.FI_INFO), expect)]
    read = facts.get(pf.dataset_read(expect.dataset_mount)) if expect.dataset_mount else None
    verdicts.append(judge_dataset(read, expect))
    return tuple(verdicts)


def judge_all_reduce(verdict: BandwidthVerdict, efa: bool) -> Verdict:
    """The all-reduce's peak bus bandwidth: FAIL when the nodes should be on EFA and it
    looks like sockets or degraded EFA; WARN when it cannot be judged."""
    if efa and verdict.looks in (Looks.SOCKETS, Looks.DEGRADED):
        return Verdict(Check.ALL_REDUCE, Status.FAIL, verdict.summary)
    if verdict.looks is Looks.UNKNOWN:
        return Verdict(Check.ALL_REDUCE, Status.WARN, verdict.summary)
    return Verdict(Check.ALL_REDUCE, Status.PASS, verdict.summary)


@dataclass(frozen=True)
class NodeCheck:
    """One node's verdicts in one round."""

    index: int
    name: str
    instance_id: str
    verdicts: tuple[Verdict, ...]

    @property
    def failed(self) -> tuple[Verdict, ...]:
        return tuple(v for v in self.verdicts if v.status is Status.FAIL)

    def evidence(self) -> str:
        """Every failed check and its evidence, one line."""
        return "; ".join(f"{v.check.value}: {v.evidence}" for v in self.failed)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "name": self.name, "instance_id": self.instance_id,
                "verdicts": [v.to_json() for v in self.verdicts]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> NodeCheck:
        return cls(int(data["index"]), str(data["name"]), str(data.get("instance_id", "")),
                   tuple(Verdict.from_json(v) for v in data.get("verdicts", [])))


@dataclass(frozen=True)
class Preflight:
    """Every round of node checks (the first on every node, then on each replacement),
    the all-reduce across the nodes (None: not run), and the replacements made."""

    rounds: tuple[tuple[NodeCheck, ...], ...] = ()
    all_reduce: Verdict | None = None
    replaced: tuple[str, ...] = field(default_factory=tuple)  # each recovery's line

    @property
    def ok(self) -> bool:
        last = self.rounds[-1] if self.rounds else ()
        reduce_failed = self.all_reduce is not None and self.all_reduce.status is Status.FAIL
        return not reduce_failed and not any(n.failed for n in last)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "rounds": [[n.to_json() for n in r] for r in self.rounds],
                "all_reduce": self.all_reduce.to_json() if self.all_reduce else None,
                "replaced": list(self.replaced)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Preflight:
        reduce = data.get("all_reduce")
        return cls(tuple(tuple(NodeCheck.from_json(n) for n in r)
                         for r in data.get("rounds", [])),
                   Verdict.from_json(reduce) if reduce else None,
                   tuple(str(r) for r in data.get("replaced", [])))


def node_line(node: NodeCheck) -> str:
    """``worker-1: FAIL gpus: ...`` or ``master: ok (gpus pass, dcgm skipped, ...)``."""
    if node.failed:
        return f"{node.name} ({node.instance_id}): FAIL {node.evidence()}"
    said = ", ".join(f"{v.check.value} {v.status.value}" for v in node.verdicts)
    warned = [f"{v.check.value}: {v.evidence}" for v in node.verdicts
              if v.status is Status.WARN]
    return f"{node.name}: ok ({said})" + "".join(f"; warning: {w}" for w in warned)


def lines(preflight: Preflight) -> list[str]:
    """The preflight as the report shows it: each round's nodes, each replacement, the
    all-reduce."""
    out = []
    for number, checks in enumerate(preflight.rounds, 1):
        where = "every node" if number == 1 else "the replacement(s)"
        out.append(f"preflight round {number} ({where}):")
        out += [f"  {node_line(n)}" for n in checks]
        if number <= len(preflight.replaced):
            out.append(f"  replaced: {preflight.replaced[number - 1]}")
    if preflight.all_reduce is not None:
        v = preflight.all_reduce
        out.append(f"preflight all-reduce: {v.status.value}: {v.evidence}")
    return out


def failed_nodes(checks: Sequence[NodeCheck]) -> tuple[NodeCheck, ...]:
    return tuple(n for n in checks if n.failed)
