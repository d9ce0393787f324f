"""Which network a job's NCCL chose, and what NVIDIA's ``all_reduce_perf`` measured.
PURE: text in, data out; no I/O, no clock; stdlib only, Python >= 3.8, so it may run on
a node.

``parse_transport`` reads a job's ``NCCL_DEBUG=INFO`` start-up lines (any prefix before
``NCCL INFO``/``NCCL WARN``: ``host:pid:tid [0]``, mpirun's ``[1,N]<stdout>:``,
CloudWatch's ``| timestamp |`` columns) and ``transport_problem`` says, where EFA was
expected, why the job is not on it and what fixes it. ``parse_all_reduce`` reads the
nccl-tests table and ``bandwidth_verdict`` weighs its peak bus bandwidth against the
type's nominal network bandwidth.

Parsed against real captures (shared/data/node-captures: nccl-efa.*, nccl-socket-
fallback.*, nccl-ofi-tcp-provider.*, nccl-no-plugin.*, all_reduce_perf.*). The line
forms come from those captures and from aws-ofi-nccl's own messages
(github.com/aws/aws-ofi-nccl, src/platform-aws.cpp: "GDR disabled on GDR-supported
instance type", "Skipping NCCL_PROTO checks on P5en + RDMA").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

__all__ = ["AllReduceResult", "BandwidthVerdict", "Cause", "Looks", "Net", "PerfHeader", "Rank",
           "Row", "Severity", "Timing", "Transport", "TransportFinding",
           "bandwidth_verdict", "parse_all_reduce", "parse_transport", "strip_prefix",
           "transport_problem"]


class Net(str, Enum):
    """The network transport NCCL uses between nodes."""

    OFI = "ofi"  # the aws-ofi-nccl plugin over libfabric ("AWS Libfabric", "Libfabric")
    SOCKET = "socket"  # NCCL's built-in TCP sockets
    IB = "ib"  # NCCL's built-in InfiniBand verbs transport (no such fabric on EC2)


class Severity(str, Enum):  # the values of training.diagnose.Severity, in rising order
    INFO = "info"
    WARNING = "warning"
    CRITICAL = "critical"


class Cause(str, Enum):
    """Why a job that should run on EFA does not (or not fully)."""

    NO_PLUGIN = "no_plugin"  # NCCL found no net plugin (libnccl-net.so)
    NO_GPUDIRECT = "no_gpudirect"  # the plugin refused: GPUDirect RDMA off on a GDR type
    PLUGIN_INIT_FAILED = "plugin_init_failed"  # loaded, but opened no EFA endpoint
    TCP_PROVIDER = "tcp_provider"  # the plugin runs, but libfabric chose tcp, not efa
    SECURITY_GROUP = "security_group"  # EFA chosen, but peers cannot reach each other
    FEWER_NICS = "fewer_nics"  # EFA chosen on fewer interfaces than the type has
    OTHER_NETWORK = "other_network"  # NCCL chose a transport that is neither EFA nor TCP
    UNEXPLAINED_SOCKETS = "unexplained_sockets"  # sockets, and the log does not say why


# -- line forms --------------------------------------------------------------------------

_MPIRUN = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")  # mpirun --tag-output
_CLOUDWATCH = re.compile(r"^\s*\|\s*\d{4}-\d\d-\d\dT[^|]*\|\s*")  # "  | 2025-05-16T… | "
_USING_NETWORK = re.compile(r"NCCL INFO Using network (.+?)\s*$")
_SOCKET_USING = re.compile(r"NET/Socket : Using (.+?)\s*$")
_SOCKET_IFACE = re.compile(r"\[\d+\]([^:\s]+):")
_IB_USING = re.compile(r"NET/IB : Using \[\d+\]")
_CHANNEL_VIA = re.compile(r"via NET/([^/\s]+(?: [^/\s]+)*)(?:/\d+)?(/GDRDMA)?")
# "Selected Provider is efa", "… is efa (found 16 nics)", "Selected provider is efa,
# fabric is efa (found 4 nics)", "Selected Provider is tcp (found 1 nics)"
_PROVIDER = re.compile(r"NET/OFI Selected [Pp]rovider is ([\w;-]+)(?:, fabric is ([^\s(]+))?"
                       r"(?: \(found (\d+) nics?\))?")
_PLUGIN_VERSION = re.compile(r"NET/OFI (?:Using|Initializing) aws-ofi-nccl (\S+)")
_LIBFABRIC_VERSION = re.compile(r"NET/OFI Using Libfabric version (\S+)")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
_NO_PLUGIN = re.compile(r"NET/Plugin ?: (?:No plugin found|Could not find: libnccl-net)")
_PLUGIN_FAILED = re.compile(r"aws-ofi-nccl initialization failed|Initializing plugin failed"
                            r"|NET/OFI Could not find any optimal provider")
_NO_GDR = re.compile(r"GDR disabled on GDR-supported instance type")
# aws-ofi-nccl#663 (security group without the self rule) and libfabric's EFA errors
# for a peer it cannot reach
_UNREACHABLE = re.compile(r"Unable to insert remote address into address vector"
                          r"|[Uu]nreachable (?:remote|peer|destination)|[Dd]estination unreachable")

# How NCCL names the plugin's network (NCCL's "Using network X", "via NET/X/…").
_OFI_NAMES = ("AWS Libfabric", "Libfabric")


def strip_prefix(line: str) -> str:
    """The line without mpirun's ``[1,N]<stdout>:`` tag or CloudWatch's ``| time |``
    columns, and without surrounding whitespace."""
    line = _MPIRUN.sub("", line, count=1)
    return _CLOUDWATCH.sub("", line, count=1).strip()


# -- the transport ---------------------------------------------------------------------

@dataclass(frozen=True)
class Transport:
    """What the log shows of NCCL's network choice. ``confirmed``: NCCL's own line
    naming the network was seen (``Using network …``, ``NET/Socket : Using …``, a
    channel ``via NET/…``); False when the kind is inferred (the plugin reported its
    provider, or failed, before the network line)."""

    kind: Net
    confirmed: bool
    evidence: str  # the line that decided ``kind``
    provider: str | None = None  # libfabric provider: "efa", "tcp"
    fabric: str | None = None  # "… fabric is efa" (newer plugins)
    nics: int | None = None  # "(found N nics)": the EFA devices the plugin uses
    plugin_version: str | None = None  # "1.4.0aws", "1.12.1-aws"
    libfabric_version: str | None = None  # "1.22"
    nccl_version: str | None = None  # "2.23.4+cuda12.4"
    gdrdma: bool = False  # a channel "via NET/…/GDRDMA": GPUDirect RDMA in use
    interfaces: tuple[str, ...] = ()  # NET/Socket's interfaces: ("eth0",)
    provider_line: str | None = None
    no_plugin: str | None = None  # the "No plugin found" line
    plugin_failed: str | None = None  # the plugin's init-failure line
    no_gdr: str | None = None  # "GDR disabled on GDR-supported instance type …"
    unreachable: tuple[str, ...] = ()  # peer-unreachable / address-vector errors


def parse_transport(lines: Iterable[str]) -> Transport | None:
    """The network NCCL chose, with the evidence of why; None when the lines decide
    nothing yet (empty, garbage, or start-up not that far). Where ranks disagree,
    sockets win: a job is as slow as its slowest link."""
    seen = _Seen()
    for raw in lines:
        seen.add(strip_prefix(raw))
    kind = seen.kind()
    if kind is None:
        return None
    net, confirmed, evidence = kind
    return Transport(
        kind=net, confirmed=confirmed, evidence=evidence, provider=seen.provider,
        fabric=seen.fabric, nics=seen.nics, plugin_version=seen.plugin_version,
        libfabric_version=seen.libfabric_version, nccl_version=seen.nccl_version,
        gdrdma=seen.gdrdma, interfaces=tuple(seen.interfaces),
        provider_line=seen.provider_line, no_plugin=seen.no_plugin,
        plugin_failed=seen.plugin_failed, no_gdr=seen.no_gdr,
        unreachable=tuple(seen.unreachable))


class _Seen:
    """Everything parse_transport collects, line by line (first line of each kind)."""

    def __init__(self) -> None:
        self.chosen: dict[Net, str] = {}  # network -> NCCL's line naming it
        self.provider: str | None = None
        self.fabric: str | None = None
        self.nics: int | None = None
        self.provider_line: str | None = None
        self.plugin_version: str | None = None
        self.libfabric_version: str | None = None
        self.nccl_version: str | None = None
        self.gdrdma = False
        self.interfaces: list[str] = []
        self.no_plugin: str | None = None
        self.plugin_failed: str | None = None
        self.no_gdr: str | None = None
        self.unreachable: list[str] = []

    def add(self, line: str) -> None:
        if "NCCL" not in line and "NET/" not in line and "libfabric" not in line:
            return
        self._network(line)
        self._provider(line)
        self._versions(line)
        self._failures(line)

    def _choose(self, net: Net, line: str) -> None:
        self.chosen.setdefault(net, line)

    def _network(self, line: str) -> None:
        using = _USING_NETWORK.search(line)
        if using:
            self._choose(_net_named(using.group(1)), line)
        socket = _SOCKET_USING.search(line)
        if socket:
            self._choose(Net.SOCKET, line)
            for name in _SOCKET_IFACE.findall(socket.group(1)):
                if name not in self.interfaces:
                    self.interfaces.append(name)
        if _IB_USING.search(line):
            self._choose(Net.IB, line)
        via = _CHANNEL_VIA.search(line)
        if via:
            self._choose(_net_named(via.group(1)), line)
            self.gdrdma = self.gdrdma or bool(via.group(2))

    def _provider(self, line: str) -> None:
        found = _PROVIDER.search(line)
        if not found:
            return
        name = found.group(1)
        # a rank on another provider outranks the ones on efa: it is the slow link
        if self.provider is None or (self.provider == "efa" and name != "efa"):
            self.provider, self.fabric, self.provider_line = name, found.group(2), line
        if found.group(3) is not None:
            nics = int(found.group(3))
            self.nics = nics if self.nics is None else min(self.nics, nics)

    def _versions(self, line: str) -> None:
        for pattern, name in ((_PLUGIN_VERSION, "plugin_version"),
                              (_LIBFABRIC_VERSION, "libfabric_version"),
                              (_NCCL_VERSION, "nccl_version")):
            found = pattern.search(line)
            if found and getattr(self, name) is None:
                setattr(self, name, found.group(1))

    def _failures(self, line: str) -> None:
        if self.no_plugin is None and _NO_PLUGIN.search(line):
            self.no_plugin = line
        if self.plugin_failed is None and _PLUGIN_FAILED.search(line):
            self.plugin_failed = line
        if self.no_gdr is None and _NO_GDR.search(line):
            self.no_gdr = line
        if _UNREACHABLE.search(line):
            self.unreachable.append(line)

    def kind(self) -> tuple[Net, bool, str] | None:
        """(network, confirmed, evidence), or None when nothing decides it."""
        for net in (Net.SOCKET, Net.IB, Net.OFI):  # the slowest choice seen wins
            if net in self.chosen:
                return net, True, self.chosen[net]
        if self.provider_line is not None and self.plugin_failed is None:
            return Net.OFI, False, self.provider_line  # the plugin runs on a provider
        failed = self.no_plugin or self.plugin_failed or self.no_gdr
        if failed is not None:  # no plugin: NCCL is left with IB (absent on EC2) or sockets
            return Net.SOCKET, False, failed
        return None


def _net_named(name: str) -> Net:
    """NCCL's name of a network -> Net (``AWS Libfabric``, ``Libfabric``: OFI)."""
    name = name.strip()
    if name in _OFI_NAMES or "Libfabric" in name or name.startswith("OFI"):
        return Net.OFI
    if name.upper().startswith("IB"):
        return Net.IB
    return Net.SOCKET


# -- what is wrong with it ---------------------------------------------------------------

@dataclass(frozen=True)
class TransportFinding:
    cause: Cause
    severity: Severity
    summary: str  # one line
    evidence: str  # the log line it rests on
    fix: str
    also_possible: tuple[str, ...] = ()  # other causes the log cannot rule out


_FIXES = {
    Cause.NO_PLUGIN: (
        "use an image that has the aws-ofi-nccl plugin (the AWS Deep Learning AMI; recent "
        "EFA installers ship it too) and put its lib directory (/opt/aws-ofi-nccl/lib on "
        "older DLAMIs) on LD_LIBRARY_PATH, or name it in NCCL_NET_PLUGIN"),
    Cause.NO_GPUDIRECT: (
        "aws-ofi-nccl will not run without GPUDirect RDMA on this type: load the "
        "nvidia_peermem kernel module (or use a driver and kernel with dma-buf support) and "
        "make sure the EFA installer's libfabric (built with CUDA) is the one loaded"),
    Cause.PLUGIN_INIT_FAILED: (
        "the plugin loaded but found no usable EFA device: run `fi_info -p efa` on the node; "
        "no output means the instance was launched without EFA interfaces or the EFA "
        "software is missing (run the EFA installer or use the AWS Deep Learning AMI); "
        "then set FI_PROVIDER=efa"),
    Cause.TCP_PROVIDER: (
        "libfabric sees no EFA device, so it chose tcp: set FI_PROVIDER=efa, check "
        "`fi_info -p efa` on the node, and in a container pass the EFA devices "
        "(--device /dev/infiniband/uverbsN) and the host's EFA libraries"),
    Cause.SECURITY_GROUP: (
        "EFA traffic between the nodes is blocked: the security group must allow all "
        "traffic from itself inbound and to itself outbound (EFA user guide)"),
    Cause.FEWER_NICS: (
        "launch with every EFA interface the type supports (one per network card) and "
        "check that `fi_info -p efa` lists them all on every node"),
    Cause.OTHER_NETWORK: (
        "NCCL is not using the aws-ofi-nccl plugin: install it (AWS Deep Learning AMI) "
        "and unset NCCL_NET / NCCL_IB_* overrides"),
    Cause.UNEXPLAINED_SOCKETS: (
        "rerun with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET to see why the plugin was "
        "not used, and check `fi_info -p efa` on the node"),
}

_POSSIBLE_SOCKET_CAUSES = (
    "no aws-ofi-nccl plugin on the library path",
    "the plugin failed to initialise (no EFA device visible, EFA software missing, "
    "FI_PROVIDER not efa)",
    "NCCL_NET=Socket or NCCL_NET_PLUGIN set in the job's environment")


def transport_problem(transport: Transport | None,
                      expected_efa: int) -> TransportFinding | None:
    """Where EFA was expected (``expected_efa``: the type's EFA interface count, > 0),
    the likely reason the job is not on it, with its evidence and fix; None when EFA
    is not expected, the log decides nothing yet, or EFA is in use on every NIC (or
    on an unprinted number of them: older plugins do not print it)."""
    if transport is None or expected_efa <= 0:
        return None
    if transport.kind == Net.SOCKET:
        return _socket_finding(transport)
    if transport.kind == Net.IB:
        return _finding(Cause.OTHER_NETWORK, Severity.CRITICAL,
                        "NCCL chose its InfiniBand transport, not EFA", transport.evidence)
    return _ofi_finding(transport, expected_efa)


def _finding(cause: Cause, severity: Severity, summary: str, evidence: str,
             also: tuple[str, ...] = ()) -> TransportFinding:
    return TransportFinding(cause, severity, summary, evidence, _FIXES[cause], also)


def _socket_finding(t: Transport) -> TransportFinding:
    prefix = "NCCL runs over TCP sockets, not EFA: "
    if t.no_gdr is not None:
        return _finding(Cause.NO_GPUDIRECT, Severity.CRITICAL,
                        prefix + "aws-ofi-nccl found GPUDirect RDMA disabled", t.no_gdr)
    if t.no_plugin is not None:
        return _finding(Cause.NO_PLUGIN, Severity.CRITICAL,
                        prefix + "no aws-ofi-nccl plugin on the image", t.no_plugin)
    if t.plugin_failed is not None:
        return _finding(Cause.PLUGIN_INIT_FAILED, Severity.CRITICAL,
                        prefix + "the aws-ofi-nccl plugin failed to initialise",
                        t.plugin_failed)
    return _finding(Cause.UNEXPLAINED_SOCKETS, Severity.CRITICAL,
                    prefix + "the log does not say why", t.evidence, _POSSIBLE_SOCKET_CAUSES)


def _ofi_finding(t: Transport, expected_efa: int) -> TransportFinding | None:
    if t.provider is not None and t.provider != "efa":
        return _finding(Cause.TCP_PROVIDER, Severity.CRITICAL,
                        f"the aws-ofi-nccl plugin runs on libfabric's {t.provider!r} provider, "
                        "not efa: no faster than sockets", t.provider_line or t.evidence)
    if t.unreachable:
        return _finding(Cause.SECURITY_GROUP, Severity.CRITICAL,
                        "EFA is chosen but the nodes cannot reach each other over it",
                        t.unreachable[0])
    if t.nics is not None and t.nics < expected_efa:
        return _finding(Cause.FEWER_NICS, Severity.WARNING,
                        f"only {t.nics} of {expected_efa} EFA interfaces in use",
                        t.provider_line or t.evidence)
    return None


# -- nccl-tests all_reduce_perf ----------------------------------------------------------

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


def bandwidth_verdict(result: AllReduceResult, nominal_gbps: float) -> BandwidthVerdict:
    """The peak bus bandwidth against the type's nominal network bandwidth
    (``nominal_gbps``, Gbit/s, e.g. 400 for p4d.24xlarge): whether it looks like EFA,
    degraded EFA or TCP sockets, in one line."""
    nominal = nominal_gbps / BITS_PER_BYTE
    big = [r for r in result.rows if r.size_bytes >= MIN_MEASURED_BYTES]
    peak = max((r.busbw_gbs for r in big if r.busbw_gbs is not None), default=None)
    if peak is None or nominal <= 0:
        why = ("no all_reduce_perf rows" if not result.rows else
               f"no message of {MIN_MEASURED_BYTES >> 20} MiB or more (run with -e 1G)"
               if not big else "no nominal bandwidth for the type")
        return BandwidthVerdict(Looks.UNKNOWN, f"cannot judge the bandwidth: {why}",
                                result.peak_busbw_gbs, nominal, None)
    ratio = peak / nominal
    looks = (Looks.SOCKETS if ratio < SOCKETS_BELOW else
             Looks.DEGRADED if ratio < EFA_ABOVE else Looks.EFA)
    return BandwidthVerdict(looks, _verdict_line(looks, peak, nominal, nominal_gbps, ratio),
                            peak, nominal, ratio)


_VERDICT_WORDS = {
    Looks.EFA: "consistent with EFA on all interfaces",
    Looks.DEGRADED: "EFA may be on fewer interfaces than the type has, or without GPUDirect "
                    "RDMA",
    Looks.SOCKETS: "looks like TCP sockets, not EFA",
}


def _verdict_line(looks: Looks, peak: float, nominal: float, gbps: float,
                  ratio: float) -> str:
    return (f"peak bus bandwidth {peak:.2f} GB/s = {ratio:.0%} of the type's nominal "
            f"{nominal:.1f} GB/s ({gbps:g} Gbit/s): {_VERDICT_WORDS[looks]}")
