"""EFA's node facts: the reads of ``efa.py`` (fi_info, /proc/modules, nvidia-smi, the
NCCL libraries) and clusterkit's own EFA profile, as ``NodeFact``s. ``facts.ALL``
registers them, so they are gathered in the same one SSH round trip as the others.
PURE. A command that is missing (no ``fi_info`` on the image, no ``nvidia-smi`` on a
CPU node) exits non-zero and the fact is its default: "no EFA", "no driver" — never an
error. The sandbox's nodes have no EFA software: there every fact here is its default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from clusterkit.bootstrap import efa
from clusterkit.bootstrap.nodefact import NodeFact, NodeFacts

# Where the EFA installer puts fi_info (and its libfabric): not on the PATH of a
# non-login root shell (`sudo -n sh -c`, sudo's secure_path), so added to it
EFA_BIN = "/opt/amazon/efa/bin"
# nvidia-smi can hang for minutes on a GPU that fell off the bus; one fact must not
# stall the whole gather (`nvidia-smi` of 8 GPUs answers in a second or two)
SMI_TIMEOUT_S = 20
PROFILE_MODE = "644"  # the profile's mode as `stat -c %a` prints it: every login reads it
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_MODE = re.compile(r"^[0-7]{3,4}$")


@dataclass(frozen=True)
class ProfileFile:
    """``efa.PROFILE_PATH`` as the node has it: its content's sha256 and its mode."""

    sha256: str
    mode: str  # "644"


def parse_profile_file(lines: list[str]) -> ProfileFile | None:
    """``sha256sum FILE`` then ``stat -c %a FILE`` -> ProfileFile; None for anything else."""
    words = [line.split() for line in lines if line.strip()]
    if len(words) != 2 or not words[0] or not words[1]:
        return None
    digest, mode = words[0][0], words[1][0]
    return ProfileFile(digest, mode) if _SHA256.match(digest) and _MODE.match(mode) else None


FI_INFO = NodeFact("fi_info", f'export PATH="$PATH:{EFA_BIN}"; {efa.FI_INFO_COMMAND}',
                   efa.parse_fi_info, efa.FiInfo())
EFA_MODULE = NodeFact("efa_module", efa.MODULE_COMMAND, efa.parse_efa_module, False)
NVIDIA_SMI = NodeFact("nvidia_smi", f"timeout {SMI_TIMEOUT_S} {efa.NVIDIA_SMI_COMMAND}",
                      efa.parse_driver_versions, efa.DriverVersions(None, None))
# `ls` of several globs exits 2 when any one matches nothing, though others did: the
# listing counts, not its exit code
NCCL_LIBS = NodeFact("nccl_libs", f"{efa.NCCL_LIB_COMMAND}; true", efa.parse_nccl_version,
                     None)
EFA_PROFILE = NodeFact("efa_profile", f"sha256sum {efa.PROFILE_PATH} && "
                       f"stat -c %a {efa.PROFILE_PATH}", parse_profile_file, None)
EFA_FACTS: tuple[NodeFact[Any], ...] = (FI_INFO, EFA_MODULE, NVIDIA_SMI, NCCL_LIBS,
                                        EFA_PROFILE)


def efa_facts(facts: NodeFacts) -> efa.EfaFacts:
    """The node's EFA facts, for ``efa.efa_environment``."""
    return efa.EfaFacts.from_parsed(facts.get(FI_INFO), facts.get(EFA_MODULE),
                                    facts.get(NVIDIA_SMI), facts.get(NCCL_LIBS))
