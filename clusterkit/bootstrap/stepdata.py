"""The data bootstrap's steps plan with: what they see of a node and of the cluster
(``NodeView``, ``DatasetView``, ``ClusterView``), a playbook call (``Command``), what a
step wants (``Want``) and what it plans (``StepPlan``). PURE. ``bootstrap.steps``
re-exports every name, where callers import them from."""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from clusterkit.plan.nodes import node_name

# -- inputs ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class NodeView:
    index: int
    address: str  # in-cluster address (private IP; the loopback address in the sandbox)
    host_key: str | None = None  # "ssh-ed25519 AAAA…", pinned at first contact
    instance_type: str | None = None  # "p4d.24xlarge"; None: not known (no EFA step)


class Verify(StrEnum):
    """How the dataset step checks a node's copy against the manifest."""

    SIZE = "size"  # every file's size (seconds)
    FULL = "full"  # every file's sha256 (reads every byte)


_VOLUME_ID = re.compile(r"^vol-([0-9a-f]{8}|[0-9a-f]{17})$")


@dataclass(frozen=True)
class DatasetView:
    """The dataset clones of a cluster, as the dataset step needs them."""

    mount: str  # storage.dataset.mount, e.g. /data
    volumes: Mapping[int, str] = field(default_factory=dict)  # node index -> vol-… (its clone)
    manifest_sha256: str | None = None  # from the snapshot's tag; None when unknown
    verify: Verify = Verify.SIZE  # the plain strings "size" and "full" are taken too
    prewarm: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "verify", Verify(self.verify))
        object.__setattr__(self, "mount", self.mount.rstrip("/") or self.mount)
        if not re.fullmatch(r"(/[^\s/]+)+", self.mount) or ".." in self.mount.split("/"):
            raise ValueError(f"dataset mount {self.mount!r}: not an absolute path")
        bad = sorted(v for v in self.volumes.values() if not _VOLUME_ID.match(v))
        if bad:
            raise ValueError(f"dataset volumes: not a volume id: {', '.join(bad)}")
        sha = self.manifest_sha256
        if sha is not None and not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise ValueError(f"dataset manifest sha256 {sha!r}: not 64 hex digits")


@dataclass(frozen=True)
class ClusterView:
    """What bootstrap needs to know of the whole cluster: every node, in index order."""

    name: str
    region: str  # where the nodes run (the EFS DNS name is regional)
    nodes: tuple[NodeView, ...]
    gpus_per_node: int = 0
    efs_id: str | None = None  # the stack's file system when the spec creates one
    dataset: DatasetView | None = None  # the deployed dataset clones, when there are any

    def __post_init__(self) -> None:
        indexes = [n.index for n in self.nodes]
        if indexes != list(range(len(indexes))):
            raise ValueError(f"cluster {self.name}: node indexes must be 0..N-1 in order, "
                             f"got {indexes}")


def host_names(cluster: str, index: int) -> tuple[str, ...]:
    """Every name a node answers to: the MXNet tutorial's, clusterkit's short names (as
    `clusterkit ssh` takes them) and its Name tag."""
    if index == 0:
        return ("deeplearning-master", "master", "master-0", node_name(cluster, 0))
    return (f"deeplearning-worker{index}", f"worker-{index}", node_name(cluster, index))


@dataclass(frozen=True)
class Command:
    """One playbook call; content travels on stdin, never on the command line."""

    playbook: str
    args: tuple[str, ...] = ()
    stdin: str | None = None

    def shell(self, text: str, sudo: str = "sudo -n") -> str:
        """The command line that runs this playbook's ``text`` as root on a node."""
        words = [*shlex.split(sudo), "bash", "-c", text, self.playbook, *self.args]
        return " ".join(shlex.quote(w) for w in words)

    def plain(self) -> dict[str, object]:
        return {"playbook": self.playbook, "args": list(self.args), "stdin": self.stdin}


@dataclass(frozen=True)
class Want:
    """What a step wants on a node: commands (their digest decides), a skip reason, or
    an error (the node cannot be set up as the spec demands). ``live`` is what the
    system shows (None: the step has no live check); ``not_live`` says in words what
    is missing when ``live`` is False. ``live_decides``: the live check alone decides,
    receipt or not (pyinfra's way for a file: one that already holds the text needs
    no command)."""

    commands: tuple[Command, ...] = ()
    skip: str | None = None
    live: bool | None = None
    not_live: str = ""
    boot_keyed: bool = False
    warning: str = ""  # what the user should know even when the step succeeds
    error: str | None = None
    live_decides: bool = False
    # ``live_suffices``: a True live check is enough without a matching receipt (what the
    # system shows was made elsewhere: an image's); a False one runs as usual
    live_suffices: bool = False


class StepAction(StrEnum):
    RUN = "run"  # its commands are sent to the node
    DONE = "done"  # nothing to do: the receipt (and the system) show it
    SKIP = "skip"  # does not apply to this node, with the reason
    FAIL = "fail"  # cannot be done as the spec asks: the node stops here


@dataclass(frozen=True)
class StepPlan:
    step: str
    action: StepAction  # the plain strings compare equal
    reason: str
    commands: tuple[Command, ...] = ()
    digest: str | None = None
    warning: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "action", StepAction(self.action))
