"""What NVIDIA's ``all_reduce_perf`` (or clusterkit's own all-reduce test, which prints
the same table) measured, and whether that bandwidth looks like EFA.
PURE: text in, data out; no I/O, no clock; stdlib only, Python >= 3.8, so it may run on
a node.

``parse_all_reduce`` reads the nccl-tests table (any prefix ``nccl.strip_prefix``
removes) and ``bandwidth_verdict`` weighs its peak bus bandwidth against the type's
nominal network bandwidth. Parsed against real captures (shared/data/node-captures:
all_reduce_perf.*).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

from clusterkit.training.nccl import strip_prefix

__all__ = ["AllReduceResult", "BandwidthVerdict", "Looks", "PerfHeader", "Rank", "Row",
           "Timing", "bandwidth_verdict", "parse_all_reduce"]


@dataclass(frozen=True)
class Timing:
    time_us: float | None
    algbw_gbs: float | None
    busbw_gbs: float | None
    errors: str  # "error" (max error, e.g. "5e-07") or "#wrong" (count) column, as printed


@dataclass(frozen=True)
class Row:
    size_bytes: int
    count: int
    dtype: str
    redop: str
    root: int | None  # newer nccl-tests print a root column (-1 for all_reduce)
    out_of_place: Timing
    in_place: Timing

    @property
    def busbw_gbs(self) -> float | None:
        """The better of the row's two bus bandwidths (GB/s); None if neither printed."""
        values = [t.busbw_gbs for t in (self.out_of_place, self.in_place)
                  if t.busbw_gbs is not None]
        return max(values) if values else None


@dataclass(frozen=True)
class PerfHeader:
    threads: int
    gpus: int  # per thread
    min_bytes: int
    max_bytes: int


@dataclass(frozen=True)
class Rank:
    rank: int
    group: int
    pid: int
    host: str
    device: int
    bus: str  # as printed between [ ]: "0x10"
    gpu: str  # "NVIDIA A100-SXM4-40GB"


@dataclass(frozen=True)
class AllReduceResult:
    rows: tuple[Row, ...]
    avg_busbw_gbs: float | None  # the "# Avg bus bandwidth" line; None if cut off
    header: PerfHeader | None = None
    ranks: tuple[Rank, ...] = ()
    out_of_bounds: int | None = None  # "# Out of bounds values : N OK"

    @property
    def peak_row(self) -> Row | None:
        """The row with the highest bus bandwidth; None without rows."""
        rows = [r for r in self.rows if r.busbw_gbs is not None]
        return max(rows, key=lambda r: r.busbw_gbs or 0.0) if rows else None

    @property
    def peak_busbw_gbs(self) -> float | None:
        """The highest bus bandwidth of any row (GB/s); None without rows."""
        row = self.peak_row
        return row.busbw_gbs if row else None


_HEADER = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)"
                     r"\s+maxBytes\s+(\d+)")
_RANK = re.compile(r"#\s*Rank\s+(\d+)\s+Group\s+(\d+)\s+Pid\s+(\d+)\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s+(.+?)\s*$")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9.]+(?:[eE][-+]?\d+)?)")
_OOB = re.compile(r"#\s*Out of bounds values\s*:\s*(\d+)")
_COLUMNS = re.compile(r"#\s*size\s+count\s+type\s+redop\b(.*)$")
_ROW_FIELDS = 12  # size count type redop, then time algbw busbw error twice
_ROW_FIELDS_ROOT = 13  # … with the newer root column after redop


def parse_all_reduce(lines: Iterable[str]) -> AllReduceResult:
    """The nccl-tests ``all_reduce_perf`` output: rows, the reported average bus
    bandwidth, the header and rank lines where printed. Lines that are not part of the
    table (NCCL INFO lines, garbage) are skipped; no rows when there is no table."""
    rows: list[Row] = []
    ranks: list[Rank] = []
    header, avg, oob, root = None, None, None, None  # root: None until a header says
    for raw in lines:
        line = strip_prefix(raw)
        if line.startswith("#"):
            header = header or _test_header(line)
            ranks += [r for r in (_rank(line),) if r is not None]
            avg = _float_match(_AVG, line, avg)
            oob = _int_match(_OOB, line, oob)
            columns = _COLUMNS.search(line)
            if columns:
                root = "root" in columns.group(1).split()
            continue
        row = _row(line.split(), root)
        if row is not None:
            rows.append(row)
    return AllReduceResult(tuple(rows), avg, header, tuple(ranks), oob)


def _test_header(line: str) -> PerfHeader | None:
    found = _HEADER.search(line)
    return PerfHeader(*(int(g) for g in found.groups())) if found else None


def _rank(line: str) -> Rank | None:
    found = _RANK.search(line)
    if not found:
        return None
    g = found.groups()
    return Rank(int(g[0]), int(g[1]), int(g[2]), g[3], int(g[4]), g[5], g[6])


def _float_match(pattern: re.Pattern, line: str, current: float | None) -> float | None:
    found = pattern.search(line)
    return float(found.group(1)) if found else current


def _int_match(pattern: re.Pattern, line: str, current: int | None) -> int | None:
    found = pattern.search(line)
    return int(found.group(1)) if found else current


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None  # "N/A"


def _row(fields: list[str], root: bool | None) -> Row | None:
    """One table row, or None when the fields are not one. Without a column header
    (cut off), the field count says whether a root column is there."""
    expected = {None: (_ROW_FIELDS, _ROW_FIELDS_ROOT), False: (_ROW_FIELDS,),
                True: (_ROW_FIELDS_ROOT,)}[root]
    if len(fields) not in expected or not (fields[0].isdigit() and fields[1].isdigit()):
        return None
    if not (fields[2][:1].isalpha() and fields[3][:1].isalpha()):
        return None  # the type ("float", "bfloat16") and redop ("sum") are words
    has_root = len(fields) == _ROW_FIELDS_ROOT
    if has_root and not re.fullmatch(r"-?\d+", fields[4]):
        return None
    rest = fields[5:] if has_root else fields[4:]
    timings = [Timing(_number(rest[i]), _number(rest[i + 1]), _number(rest[i + 2]),
                      rest[i + 3]) for i in (0, 4)]
    if all(t.time_us is None and t.busbw_gbs is None for t in timings):
        return None  # a line of words that happens to have the right shape
    return Row(int(fields[0]), int(fields[1]), fields[2], fields[3],
               int(fields[4]) if has_root else None, timings[0], timings[1])


# -- the bandwidth check -----------------------------------------------------------------

class Looks(str, Enum):
    """What a measured bus bandwidth looks like against the type's network."""

    EFA = "efa"  # near the type's nominal bandwidth
    DEGRADED = "degraded"  # well above sockets, well below nominal
    SOCKETS = "sockets"  # what NCCL's TCP sockets reach
    NO_EFA = "no_efa"  # the nodes have no EFA: TCP is all there is, weighed against ENA
    UNKNOWN = "unknown"  # no table, or no message large enough to measure bandwidth


# NCCL's socket transport is CPU-bound at a few GB/s per node (2.00 GB/s bus bandwidth in
# the EKS socket capture); every EFA type has >= 100 Gbit/s (12.5 GB/s), so a peak under a
# tenth of nominal is sockets (or libfabric's tcp provider, no faster).
SOCKETS_BELOW = 0.10
# EFA on every NIC reaches 80-90% of nominal (43.81 of 50 GB/s on 2x p4d.24xlarge); one
# NIC of four in use gave ~20 of ~78 GB/s (skypilot#8391). Under half is EFA short of
# interfaces or of GPUDirect RDMA.
EFA_ABOVE = 0.50
# Bus bandwidth reaches its plateau only for messages of hundreds of MB; a test that
# stops below 128 MiB measures latency, not the network.
MIN_MEASURED_BYTES = 128 * 1024 * 1024
BITS_PER_BYTE = 8.0


@dataclass(frozen=True)
class BandwidthVerdict:
    looks: Looks
    summary: str  # one line
    peak_busbw_gbs: float | None
    nominal_gbs: float  # the type's network, GB/s (Gbit/s / 8)
    ratio: float | None  # peak / nominal


def bandwidth_verdict(result: AllReduceResult, nominal_gbps: float,
                      efa: bool = True) -> BandwidthVerdict:
    """The peak bus bandwidth against the type's nominal network bandwidth
    (``nominal_gbps``, Gbit/s, e.g. 400 for p4d.24xlarge): whether it looks like EFA,
    degraded EFA or TCP sockets, in one line. ``efa`` False: the nodes have no EFA (the
    type has none, or the spec turned it off), so only the ratio is said."""
    nominal = nominal_gbps / BITS_PER_BYTE
    big = [r for r in result.rows if r.size_bytes >= MIN_MEASURED_BYTES]
    peak = max((r.busbw_gbs for r in big if r.busbw_gbs is not None), default=None)
    if peak is None or nominal <= 0:
        why = ("no all_reduce_perf rows" if not result.rows else
               f"no message of {MIN_MEASURED_BYTES >> 20} MiB or more (test up to 1 GiB: "
               "all_reduce_perf -e 1G, clusterkit train --nccl-test --nccl-max-bytes 1G)"
               if not big else "no nominal bandwidth for the type")
        return BandwidthVerdict(Looks.UNKNOWN, f"cannot judge the bandwidth: {why}",
                                result.peak_busbw_gbs, nominal, None)
    ratio = peak / nominal
    looks = (Looks.NO_EFA if not efa else Looks.SOCKETS if ratio < SOCKETS_BELOW else
             Looks.DEGRADED if ratio < EFA_ABOVE else Looks.EFA)
    return BandwidthVerdict(looks, _verdict_line(looks, peak, nominal, nominal_gbps, ratio),
                            peak, nominal, ratio)


_VERDICT_WORDS = {
    Looks.EFA: "looks like EFA on every interface",
    Looks.DEGRADED: "EFA may be on fewer interfaces than the type has, or without GPUDirect "
                    "RDMA",
    Looks.SOCKETS: "looks like TCP sockets, not EFA",
    Looks.NO_EFA: "no EFA on these nodes: NCCL runs over TCP sockets",
}


def _verdict_line(looks: Looks, peak: float, nominal: float, gbps: float,
                  ratio: float) -> str:
    return (f"peak bus bandwidth {peak:.2f} GB/s = {ratio:.0%} of the type's nominal "
            f"{nominal:.1f} GB/s ({gbps:g} Gbit/s): {_VERDICT_WORDS[looks]}")
