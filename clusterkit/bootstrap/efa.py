"""EFA on a node: what its software offers, parsed, and the libfabric/NCCL settings a
job there should get. PURE: text in, data out; no I/O, no clock; stdlib only, Python
>= 3.8, so it may run on a node.

The node-side commands (run as any user; each prints nothing or fails where the thing
is absent, which the parsers read as "absent"):

- ``FI_INFO_COMMAND`` (``fi_info -p efa -t FI_EP_RDM``): one block per EFA device the
  libfabric EFA provider can open. Nothing, or ``fi_getinfo: -61 (No data available)``:
  no usable EFA (no interface attached, no EFA software, or a container without
  ``/dev/infiniband``).
- ``MODULE_COMMAND`` (``cat /proc/modules``): the loaded kernel modules in ``lsmod``'s
  order, readable without kmod's tools and inside containers (the table is the host's).
- ``NVIDIA_SMI_COMMAND`` (``nvidia-smi``): the header's driver and CUDA versions.
- ``NCCL_LIB_COMMAND``: the system NCCL's library files; the version is in the name
  (``libnccl.so.2.18.5``). ``ldconfig -p`` only lists the ``libnccl.so.2`` link, so a
  glob it is. A framework's own NCCL (PyTorch wheels bundle one) is not found this way:
  the NCCL a job really used is its ``NCCL version`` line (training/nccl.py).

Where each setting ``efa_environment`` writes comes from:

- ``FI_PROVIDER=efa``: the EC2 User Guide's NCCL test ("Get started with EFA and NCCL",
  step "Test your EFA and NCCL configuration": "specifies the fabric interface provider.
  This must be set to efa"). Newer aws-ofi-nccl selects efa itself on EC2
  (src/platform-aws.cpp, platform_init); setting it also stops libfabric falling back
  to its tcp provider silently (the nccl-ofi-tcp-provider capture).
- ``FI_EFA_FORK_SAFE=1``: aws-ofi-nccl sets it itself for NVIDIA platforms
  (platform-aws.cpp: on legacy kernels/rdma-core the EFA provider aborts a process that
  forks, e.g. a PyTorch DataLoader worker); AWS's EFA cheatsheet
  (aws-samples/awsome-distributed-training, 1.architectures/efa-cheatsheet.md): "Not
  needed for kernel>=5.15. Still fine to set it". Set so non-NCCL libfabric users
  (MPI) get it too.
- ``FI_EFA_USE_DEVICE_RDMA=1``: the EC2 User Guide's NCCL test sets it for
  ``p4d.24xlarge`` ("uses the device's RDMA functionality for one-sided and two-sided
  transfer"); the cheatsheet: not needed for libfabric >= 1.18 with aws-ofi-nccl >= 1.7
  but "not harmful to set it on p4/p5". Only on the types aws-ofi-nccl itself marks
  ``gdr_required`` (platform-aws.cpp: p4d.24xlarge, p4de.24xlarge, p5/p5e except
  p5.4xlarge, p5en.48xlarge): libfabric's fi_efa(7) aborts the application when it is 1
  on a device without RDMA (p3dn, g5, g6, …).
- ``FI_EFA_SET_CUDA_SYNC_MEMOPS=0``: the cheatsheet: "Set this on efa-installer<1.29.1
  and nccl>=2.19.0" (else "NET/OFI Unable to register memory … Invalid argument");
  awsome-distributed-ai#278 (EFA 1.26.0, NCCL 2.19+). libfabric added the variable in
  1.16 (ofiwg/libfabric#7995) and removed it in the 1.19 series (#9459), so it is set
  only for libfabric 1.16 to 1.19.0 with a system NCCL >= 2.19 (a warning when the NCCL
  version is unknown); elsewhere it would be ignored or wrong.
- Not set: ``NCCL_PROTO=simple`` (the cheatsheet: only for aws-ofi-nccl <= 1.5.0; newer
  plugins force it themselves where the device lacks ordering, platform-aws.cpp, and it
  slows small messages everywhere else) and ``NCCL_BUFFSIZE``/``NCCL_P2P_NET_CHUNKSIZE``
  (the plugin sets them per platform). The plugin's version is not a node fact, so an
  old stack gets a warning instead.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from clusterkit.node import paths

FI_INFO_COMMAND = "fi_info -p efa -t FI_EP_RDM"
MODULE_COMMAND = "cat /proc/modules"
NVIDIA_SMI_COMMAND = "nvidia-smi"
NCCL_LIB_COMMAND = ("ls -1 /usr/lib/x86_64-linux-gnu/libnccl.so.* /usr/lib/aarch64-linux-gnu/"
                    "libnccl.so.* /usr/lib64/libnccl.so.* /usr/local/cuda/lib64/libnccl.so.* "
                    "/opt/nccl/build/lib/libnccl.so.* 2>/dev/null")
PROFILE_PATH = paths.EFA_PROFILE  # written once per node, sourced by jobs

EFA_PROVIDER = "efa"
EFA_MODULE = "efa"
# The types aws-ofi-nccl requires GPUDirect RDMA on (platform-aws.cpp ``gdr_required``):
# FI_EFA_USE_DEVICE_RDMA=1 is right there and aborts the job on devices without RDMA.
# p5.4xlarge is excluded there (gdr_required false), so here too.
GPUDIRECT_RDMA_TYPES = frozenset({"p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge",
                                  "p5e.48xlarge", "p5en.48xlarge"})
# GPU architectures of those types (A100, H100, H200): a catalog that says otherwise is wrong
GPUDIRECT_ARCHS = frozenset({"ampere", "hopper"})
# libfabric's FI_EFA_SET_CUDA_SYNC_MEMOPS window (see the module docstring): 1.16 began
# setting the CUDA attribute (and added the variable), the 1.19 series stopped
SYNC_MEMOPS_LIBFABRIC_FROM = (1, 16, 0)
SYNC_MEMOPS_LIBFABRIC_BEFORE = (1, 19, 1)
SYNC_MEMOPS_NCCL_FROM = (2, 19, 0)
# AWS's cheatsheet for p5.48xlarge: "Use cuda>=12.0, nccl>=2.18.0 (recommend at least 2.18.5)"
P5_FAMILIES = frozenset({"p5", "p5e", "p5en"})
P5_MIN_CUDA = (12, 0)
P5_MIN_NCCL = (2, 18, 5)
# The cheatsheet's presets change at libfabric 1.18 (with aws-ofi-nccl 1.7): older
# stacks need NCCL_PROTO=simple and more, which clusterkit cannot judge without the
# plugin's version.
OLD_LIBFABRIC_BEFORE = (1, 18, 0)

_MPIRUN = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_MPIRUN_RANK = re.compile(r"^\[\d+,(\d+)\]<std(?:out|err)>:")
_FI_FIELD = re.compile(r"^\s*(provider|fabric|domain|version|type|protocol):\s*(\S.*?)\s*$")
_FI_ERROR = re.compile(r"fi_getinfo:\s*-?\d+.*$")
_ENDPOINT_SUFFIX = re.compile(r"-(?:rdm|dgrm)$")
_PROV_VERSION = re.compile(r"^(\d+)\.(\d+)$")
_DRIVER = re.compile(r"Driver Version\s*:\s*(\d+(?:\.\d+)+)")
_CUDA = re.compile(r"CUDA Version\s*:\s*(\d+(?:\.\d+)+)")
_NCCL_FILE = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)\b")
_NCCL_LINE = re.compile(r"NCCL version (\d+\.\d+\.\d+)")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


# -- fi_info -----------------------------------------------------------------------------

@dataclass(frozen=True)
class FiEntry:
    """One ``fi_info`` block."""

    provider: str
    fabric: str | None = None  # "EFA-fe80::10d8:baff:fec9:6c1" (older), "efa" (newer)
    domain: str | None = None  # "rdmap16s27-rdm"
    version: str | None = None  # the provider's version: "111.20"
    type: str | None = None  # "FI_EP_RDM"
    protocol: str | None = None  # "FI_PROTO_EFA"
    rank: int | None = None  # mpirun's rank when run through ``mpirun --tag-output``

    @property
    def device(self) -> str | None:
        """The EFA device: the domain without its endpoint suffix (``rdmap16s27``)."""
        return _ENDPOINT_SUFFIX.sub("", self.domain) if self.domain else None


@dataclass(frozen=True)
class FiInfo:
    entries: tuple[FiEntry, ...] = ()
    error: str | None = None  # "fi_getinfo: -61 (No data available)"

    @property
    def efa(self) -> tuple[FiEntry, ...]:
        return tuple(e for e in self.entries if e.provider == EFA_PROVIDER)

    @property
    def present(self) -> bool:
        """The EFA provider opened at least one device."""
        return bool(self.efa)

    @property
    def ranks(self) -> tuple[int | None, ...]:
        """The nodes the output covers: mpirun ranks in order, (None,) for a plain run."""
        return tuple(dict.fromkeys(e.rank for e in self.efa))

    def devices(self, rank: int | None = None) -> tuple[str, ...]:
        """The distinct EFA devices one node (``rank``; None: unranked output) lists."""
        return tuple(dict.fromkeys(e.device for e in self.efa
                                   if e.rank == rank and e.device is not None))

    @property
    def devices_per_node(self) -> int:
        """EFA devices per node: the fewest any node in the output lists; 0 without EFA."""
        return min((len(self.devices(r)) for r in self.ranks), default=0)

    @property
    def provider_version(self) -> str | None:
        return next((e.version for e in self.efa if e.version), None)

    @property
    def libfabric_version(self) -> str | None:
        """The libfabric release the provider version encodes ("111.20" -> "1.11.2")."""
        return libfabric_release(self.provider_version)


def libfabric_release(provider_version: str | None) -> str | None:
    """libfabric's release from an in-tree provider's version as ``fi_info`` prints it:
    libfabric builds it as (major * 100 + minor).(revision * 10), the last digit kept for
    custom builds (include/ofi.h ``OFI_VERSION_DEF_PROV``): "111.20" -> "1.11.2",
    "120.10" -> "1.20.1". None when it is not of that form."""
    found = _PROV_VERSION.match(provider_version or "")
    if not found or int(found.group(1)) < 100:
        return None
    first, second = int(found.group(1)), int(found.group(2))
    return f"{first // 100}.{first % 100}.{second // 10}"


def parse_fi_info(lines: Iterable[str]) -> FiInfo:
    """``fi_info -p efa [-t FI_EP_RDM]`` output -> FiInfo; empty for no output, an
    error line, or anything else. Accepts mpirun's ``[1,N]<stdout>:`` tags (the rank is
    kept) and skips lines that are not fi_info's (ssh warnings, ``...``)."""
    entries: list[FiEntry] = []
    current: dict[str, str] = {}
    rank: int | None = None
    error = None
    for raw in lines:
        tag = _MPIRUN_RANK.match(raw)
        line = _MPIRUN.sub("", raw, count=1)
        found = _FI_FIELD.match(line)
        if found is None:
            error = error or _fi_error(line)
            continue
        key, value = found.groups()
        if key == "provider":
            entries += _fi_entry(current, rank)
            current, rank = {}, int(tag.group(1)) if tag else None
        current[key] = value
    entries += _fi_entry(current, rank)
    return FiInfo(tuple(entries), None if entries else error)


def _fi_error(line: str) -> str | None:
    found = _FI_ERROR.search(line)
    return found.group(0).strip() if found else None


def _fi_entry(fields: dict[str, str], rank: int | None) -> list[FiEntry]:
    if "provider" not in fields:
        return []
    return [FiEntry(fields["provider"], fields.get("fabric"), fields.get("domain"),
                    fields.get("version"), fields.get("type"), fields.get("protocol"),
                    rank)]


# -- the kernel module, the driver, NCCL ----------------------------------------------------

def parse_efa_module(lines: Iterable[str]) -> bool:
    """Whether the ``efa`` kernel module is loaded, from ``cat /proc/modules`` (or
    ``lsmod``: the module name is the first field of each line either way)."""
    return any(line.split()[:1] == [EFA_MODULE] for line in lines)


@dataclass(frozen=True)
class DriverVersions:
    driver: str | None  # "535.54.03"
    cuda: str | None  # the CUDA version the driver supports: "12.2"; old drivers omit it


def parse_driver_versions(lines: Iterable[str]) -> DriverVersions:
    """The driver and CUDA versions from ``nvidia-smi``'s header (``Driver Version:
    535.54.03   CUDA Version: 12.2``) or ``nvidia-smi -q`` (``Driver Version : …``)."""
    driver = cuda = None
    for line in lines:
        driver = driver or _group(_DRIVER, line)
        cuda = cuda or _group(_CUDA, line)
    return DriverVersions(driver, cuda)


def parse_nccl_version(lines: Iterable[str]) -> str | None:
    """The newest NCCL among library file names (``…/libnccl.so.2.18.5``, from
    ``NCCL_LIB_COMMAND``) or ``NCCL version 2.18.5+cuda12.2`` lines; None if none."""
    found = []
    for line in lines:
        found += _NCCL_FILE.findall(line) + _NCCL_LINE.findall(line)
    return max(found, key=version_tuple, default=None)


def _group(pattern: re.Pattern, line: str) -> str | None:
    found = pattern.search(line)
    return found.group(1) if found else None


def version_tuple(version: str | None) -> tuple[int, ...]:
    """"2.18.5+cuda12.2" -> (2, 18, 5); () when there is no leading number."""
    found = re.match(r"\d+(?:\.\d+)*", version or "")
    return tuple(int(p) for p in found.group(0).split(".")) if found else ()


# -- the node's EFA facts ----------------------------------------------------------------

@dataclass(frozen=True)
class EfaFacts:
    efa_devices: int  # EFA devices the libfabric provider can open on this node
    provider: bool  # libfabric's EFA provider present and working (fi_info lists it)
    module_loaded: bool  # the efa kernel module is loaded
    libfabric_version: str | None = None  # "1.11.2"
    cuda_version: str | None = None  # what the driver supports: "12.2"
    driver_version: str | None = None  # "535.54.03"
    nccl_version: str | None = None  # the system NCCL: "2.18.5"

    @classmethod
    def from_outputs(cls, fi_info: Sequence[str] | None, modules: Sequence[str] | None,
                     nvidia_smi: Sequence[str] | None = None,
                     nccl_libs: Sequence[str] | None = None) -> EfaFacts:
        """The facts from each command's output lines (None: the command failed)."""
        return cls.from_parsed(parse_fi_info(fi_info or ()), parse_efa_module(modules or ()),
                               parse_driver_versions(nvidia_smi or ()),
                               parse_nccl_version(nccl_libs or ()))

    @classmethod
    def from_parsed(cls, info: FiInfo, module_loaded: bool, driver: DriverVersions,
                    nccl_version: str | None) -> EfaFacts:
        """The facts from each command's parsed output (the node facts hold these)."""
        return cls(efa_devices=info.devices_per_node, provider=info.present,
                   module_loaded=module_loaded, libfabric_version=info.libfabric_version,
                   cuda_version=driver.cuda, driver_version=driver.driver,
                   nccl_version=nccl_version)


# -- the environment ---------------------------------------------------------------------

@dataclass(frozen=True)
class EfaEnv:
    env: dict[str, str] = field(default_factory=dict)  # what the node profile exports
    warnings: list[str] = field(default_factory=list)  # one line each


_INSTALL = ("use an AMI with the EFA software (the AWS Deep Learning AMI) or run the EFA "
            "installer (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html)")


def efa_environment(facts: EfaFacts, instance_type: str, gpu_arch: str | None,
                    expected_efa: int | None = None) -> EfaEnv:
    """The libfabric/NCCL settings AWS documents for ``instance_type`` (see the module
    docstring for each one's source), and warnings in words. ``expected_efa``: the
    type's EFA interface count (0: the type has no EFA, nothing to set; None: unknown,
    the type is taken to be EFA-capable). ``gpu_arch`` None (no GPU): no GPUDirect
    setting. No EFA software on the node: no settings, and a warning naming what is
    missing and how to fix it."""
    if expected_efa is not None and expected_efa <= 0:
        return EfaEnv()
    missing = _missing_software(facts, instance_type)
    if missing is not None:
        return EfaEnv({}, [missing])
    env = {"FI_PROVIDER": EFA_PROVIDER, "FI_EFA_FORK_SAFE": "1"}
    if instance_type in GPUDIRECT_RDMA_TYPES and gpu_arch in GPUDIRECT_ARCHS:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    warnings = _device_warnings(facts, instance_type, expected_efa)
    memops = _sync_memops(facts)
    if memops is True:
        env["FI_EFA_SET_CUDA_SYNC_MEMOPS"] = "0"
    elif memops is not None:
        warnings.append(memops)
    return EfaEnv(env, warnings + _version_warnings(facts, instance_type))


def _missing_software(facts: EfaFacts, instance_type: str) -> str | None:
    """A warning when the node cannot use EFA at all; None when the provider works."""
    if facts.provider:
        return None
    lead = f"{instance_type} supports EFA but NCCL will fall back to TCP sockets on this node: "
    if not facts.module_loaded:
        return (lead + "no EFA software (no efa kernel module, and libfabric's EFA provider "
                "finds nothing: `fi_info -p efa`); " + _INSTALL)
    return (lead + "the efa kernel module is loaded but libfabric's EFA provider finds no "
            "device (`fi_info -p efa`): the instance has no EFA interface attached, or the "
            "image lacks the EFA installer's libfabric (/opt/amazon/efa); " + _INSTALL)


def _device_warnings(facts: EfaFacts, instance_type: str,
                     expected_efa: int | None) -> list[str]:
    warnings = []
    if expected_efa is not None and facts.efa_devices < expected_efa:
        warnings.append(f"only {facts.efa_devices} of the {expected_efa} EFA interfaces "
                        f"{instance_type} supports are visible on this node: launch with an "
                        "EFA interface on every network card")
    if not facts.module_loaded:
        warnings.append("libfabric's EFA provider works but the efa kernel module is not in "
                        "/proc/modules: the EFA driver may be built into the kernel; check "
                        "`fi_info -p efa` if EFA misbehaves")
    return warnings


def _sync_memops(facts: EfaFacts) -> bool | str | None:
    """True: set FI_EFA_SET_CUDA_SYNC_MEMOPS=0; a warning when the libfabric is in the
    window but the NCCL version is unknown; None when it does not apply."""
    libfabric = version_tuple(facts.libfabric_version)
    if not SYNC_MEMOPS_LIBFABRIC_FROM <= libfabric < SYNC_MEMOPS_LIBFABRIC_BEFORE:
        return None
    nccl = version_tuple(facts.nccl_version)
    if not nccl:
        return (f"libfabric {facts.libfabric_version} (1.16 to 1.19.0): if the job's NCCL is "
                "2.19 or newer, set FI_EFA_SET_CUDA_SYNC_MEMOPS=0 (or upgrade the EFA "
                "installer to 1.29.1 or later)")
    return True if nccl >= SYNC_MEMOPS_NCCL_FROM else None


def _version_warnings(facts: EfaFacts, instance_type: str) -> list[str]:
    warnings = []
    libfabric = version_tuple(facts.libfabric_version)
    if libfabric and libfabric < OLD_LIBFABRIC_BEFORE:
        warnings.append(f"libfabric {facts.libfabric_version} is older than 1.18: AWS's "
                        "settings for such stacks depend on the aws-ofi-nccl version "
                        "(NCCL_PROTO=simple before 1.6); upgrade the EFA installer")
    if instance_type.split(".")[0] in P5_FAMILIES:
        cuda, nccl = version_tuple(facts.cuda_version), version_tuple(facts.nccl_version)
        if cuda and cuda < P5_MIN_CUDA:
            warnings.append(f"CUDA {facts.cuda_version} on {instance_type}: AWS asks for "
                            "CUDA 12.0 or later on P5")
        if nccl and nccl < P5_MIN_NCCL:
            warnings.append(f"NCCL {facts.nccl_version} on {instance_type}: AWS recommends "
                            "NCCL 2.18.5 or later on P5")
    return warnings


def profile_text(env: dict[str, str]) -> str:
    """The shell profile (``PROFILE_PATH``) exporting ``env``: a header comment, then one
    ``export NAME=value`` line per setting in name order, values shell-quoted. Raises
    ValueError for a name that is not a shell variable name."""
    bad = [name for name in env if not _ENV_NAME.match(name)]
    if bad:
        raise ValueError(f"not shell variable names: {', '.join(sorted(bad))}")
    lines = ["# Written by clusterkit: libfabric/NCCL settings for EFA "
             "(clusterkit/bootstrap/efa.py). Do not edit: rewritten on bootstrap."]
    lines += [f"export {name}={shlex.quote(env[name])}" for name in sorted(env)]
    return "\n".join(lines) + "\n"
