"""Which network a job's NCCL chose, and why it is not EFA where EFA was expected.
PURE: text in, data out; no I/O, no clock; stdlib only, Python >= 3.8, so it may run on
a node.

``parse_transport`` reads a job's ``NCCL_DEBUG=INFO`` start-up lines (any prefix before
``NCCL INFO``/``NCCL WARN``: ``host:pid:tid [0]``, mpirun's ``[1,N]<stdout>:``,
CloudWatch's ``| timestamp |`` columns) and ``transport_problem`` says, where EFA was
expected, why the job is not on it and what fixes it. The all_reduce_perf table and the
bandwidth check are in ``allreduce.py``.

Parsed against real captures (shared/data/node-captures: nccl-efa.*, nccl-socket-
fallback.*, nccl-ofi-tcp-provider.*, nccl-no-plugin.*). The line forms come from those
captures and from aws-ofi-nccl's own messages (github.com/aws/aws-ofi-nccl,
src/platform-aws.cpp: "GDR disabled on GDR-supported instance type", "Skipping
NCCL_PROTO checks on P5en + RDMA").
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum

__all__ = ["DEBUG_ENV", "Cause", "Net", "Severity", "Transport", "TransportFinding",
           "parse_transport", "strip_prefix", "transport_problem"]

# What a job on EFA nodes runs with so its log says which network NCCL chose: INFO lines
# of NCCL's start-up (INIT) and network (NET) subsystems only, a few dozen per rank, not
# the per-collective chatter of NCCL_DEBUG=INFO alone.
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}


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
# Transport's version fields -> the line that names the version (its one group)
_VERSIONS = {
    "plugin_version": re.compile(r"NET/OFI (?:Using|Initializing) aws-ofi-nccl (\S+)"),
    "libfabric_version": re.compile(r"NET/OFI Using Libfabric version (\S+)"),
    "nccl_version": re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)"),
}
# Transport's failure fields -> the line that says the failure (the first one is kept)
_FAILURES = {
    "no_plugin": re.compile(r"NET/Plugin ?: (?:No plugin found|Could not find: libnccl-net)"),
    "plugin_failed": re.compile(r"aws-ofi-nccl initialization failed"
                                r"|Initializing plugin failed"
                                r"|NET/OFI Could not find any optimal provider"),
    "no_gdr": re.compile(r"GDR disabled on GDR-supported instance type"),
}
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
        for name, pattern in _VERSIONS.items():
            found = pattern.search(line)
            if found and getattr(self, name) is None:
                setattr(self, name, found.group(1))

    def _failures(self, line: str) -> None:
        for name, pattern in _FAILURES.items():
            if getattr(self, name) is None and pattern.search(line):
                setattr(self, name, line)
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
