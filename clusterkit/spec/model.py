"""Typed, immutable cluster spec. PURE: no I/O.

Every value keeps where it came from: ``Spec.locations`` maps a key path
(``nodes.instance_types[1]``) to its ``Location`` in the YAML file, so any layer
can point the user at the exact line of the value it is complaining about.
Defaults that were not written in the file have no location; ``Spec.where()``
then falls back to the nearest written parent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from clusterkit.kinds import MarketPolicy

MARKETS = tuple(p.value for p in MarketPolicy)
MASTER_MARKETS = ("spot", "on-demand")
FRAMEWORKS = ("mxnet", "torchrun")
CHECKPOINT_SIGNALS = ("SIGUSR1", "SIGUSR2", "SIGHUP", "SIGINT", "SIGTERM")
VOLUME_TYPES = ("gp2", "gp3", "io1", "io2", "st1", "sc1")
ROOT_VOLUME_TYPES = ("gp2", "gp3", "io1", "io2")
EFS_DELETION_POLICIES = ("retain", "delete")
EFA_MODES = ("auto", "true", "false")  # network.efa; YAML's true/false are read as these

# The most nodes a spec may ask for without `nodes.allow_large: true`.
SANE_NODE_LIMIT = 64


@dataclass(frozen=True)
class Location:
    file: str
    line: int  # 1-based
    col: int  # 1-based

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


@dataclass(frozen=True)
class Image:
    """An AMI by id, or the newest AMI whose name matches ``name`` owned by ``owner``."""

    id: str | None = None
    name: str | None = "Deep Learning AMI GPU PyTorch * (Ubuntu 22.04) *"
    owner: str = "amazon"


@dataclass(frozen=True)
class RootVolume:
    size_gb: int = 200
    type: str = "gp3"


@dataclass(frozen=True)
class Master:
    """What sets the master (node 0) apart: its market (None: ``nodes.market``'s)."""

    market: str | None = None


@dataclass(frozen=True)
class Nodes:
    count: int = 1
    instance_types: tuple[str, ...] = ()
    market: str = MarketPolicy.SPOT.value
    max_price: float | None = None  # USD per node-hour; None = up to on-demand
    image: Image = field(default_factory=Image)
    placement_group: bool = True
    root_volume: RootVolume = field(default_factory=RootVolume)
    allow_large: bool = False  # permit count > SANE_NODE_LIMIT
    containers: bool = False  # the nodes run containers: IMDS answers one hop more
    master: Master = field(default_factory=Master)
    # an ODCR (cr-…) or a resource group of reservations (its ARN) the nodes launch
    # into; with market capacity-block, the block's reservation id
    capacity_reservation: str | None = None

    @property
    def reservation_id(self) -> str | None:
        """The one reservation ``capacity_reservation`` names (None: none, or a group)."""
        cr = self.capacity_reservation
        return cr if cr is not None and cr.startswith("cr-") else None

    def master_apart(self, market: str) -> str | None:
        """The master's market when a launch in ``market`` must put it elsewhere
        (``master.market``); None when the master goes with the others."""
        wanted = self.master.market
        return wanted if wanted is not None and wanted != str(market) else None


@dataclass(frozen=True)
class Ssh:
    key_name: str | None = None  # EC2 key pair name
    user: str = "ubuntu"
    identity_file: str | None = None  # None: use the ssh-agent
    allowed_cidr: str | None = None  # None: the caller's public address /32
    port: int = 22


@dataclass(frozen=True)
class Scratch:
    """RAID-0 over the instance-store NVMe disks, set up at every boot."""

    mount: str = "/scratch"
    raid0: bool = True


@dataclass(frozen=True)
class Efs:
    """Create a file system (``file_system_id`` None) or mount an existing one."""

    file_system_id: str | None = None
    mount: str = "/efs"
    deletion_policy: str = "retain"
    tls: bool = True  # False: plain NFS (the spec must say so)

    @property
    def create(self) -> bool:
        return self.file_system_id is None


@dataclass(frozen=True)
class Dataset:
    snapshot: str | None = None
    mount: str = "/data"
    volume_type: str = "gp3"
    iops: int | None = None  # gp3 default 3000
    throughput: int | None = None  # MiB/s, gp3 only, default 125
    initialization_rate: int | None = None  # MiB/s, CreateVolume VolumeInitializationRate
    size_gb: int | None = None  # volume size; None: the snapshot's size


@dataclass(frozen=True)
class Storage:
    scratch: Scratch | None = None
    efs: Efs | None = None
    dataset: Dataset | None = None
    kms_key: str | None = None  # None: the AWS-managed key of each service


@dataclass(frozen=True)
class Elastic:
    """An elastic torchrun job (``train.elastic``): it goes on with as few as ``min``
    nodes while a lost one is replaced; torchrun restarts its workers at most
    ``max_restarts`` times after a failure (a node joining costs none)."""

    min: int = 1
    max_restarts: int = 3


@dataclass(frozen=True)
class Train:
    framework: str = "mxnet"
    command: str | None = None
    workdir: str = "~"
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    servers_per_node: int = 1
    workers_per_node: int = 1  # torchrun: processes per node; 0 = one per GPU
    python: str = "python3"
    packages: tuple[str, ...] = ()  # pip packages installed on the nodes, e.g. mxnet-cu112
    checkpoint_signal: str = "SIGUSR1"  # on a spot interruption notice, to every process
    checkpoint_grace: float = 90.0  # seconds from it to SIGTERM (capped by the notice)
    checkpoint_dir: str | None = None  # where the script saves (EFS, S3): outlives a node
    max_recoveries: int = 0  # lost nodes replaced and the job restarted, at most this often
    node_timeout: float = 60.0  # a node silent this long is lost
    prelaunch_on_rebalance: bool = True  # a rebalance recommendation boots a standby
    standby_minutes: float = 30.0  # a standby no notice claimed is terminated after this
    sample_interval: float = 2.0  # seconds between a node's metric samples (`top`)
    throughput_pattern: str | None = None  # a regex with one number group: samples/s
    stall_after: float = 600.0  # seconds without progress and with idle GPUs: stalled
    stop_on_stall: bool = False  # a stalled job is stopped after its checkpoint signal
    gpu_health_every: float = 60.0  # seconds between GPU health reads on a node (0: off)
    preflight: bool = False  # every node checked before the job (`train --preflight`)
    max_cost: float | None = None  # USD the job may spend (training/budget.py)
    elastic: Elastic | None = None  # torchrun only: go on smaller while a node is replaced


@dataclass(frozen=True)
class Autostop:
    """Shut the nodes down after ``idle_s`` seconds idle (None: off, as written);
    ``action``: what the instances do then (their InstanceInitiatedShutdownBehavior)."""

    idle_s: int | None = 1800
    action: str = "terminate"

    @property
    def on(self) -> bool:
        return self.idle_s is not None


@dataclass(frozen=True)
class Network:
    """The network between the nodes: ``efa`` auto (every EFA interface of an
    EFA-capable type), true (required: a type without EFA is a spec error) or false."""

    efa: str = "auto"

    @property
    def efa_wanted(self) -> bool:
        return self.efa != "false"


@dataclass(frozen=True)
class Spec:
    name: str
    region: str
    regions: tuple[str, ...]  # regions allowed for spot search; always starts with `region`
    nodes: Nodes
    ssh: Ssh
    storage: Storage
    train: Train | None
    tags: Mapping[str, str]
    autostop: Autostop | None = None  # None: not written (`up` keeps what the nodes run)
    network: Network = field(default_factory=Network)
    file: str = "<memory>"
    locations: Mapping[str, Location] = field(
        default_factory=lambda: MappingProxyType({}), compare=False, repr=False)

    def where(self, path: str) -> Location:
        """Location of ``path``, or of its nearest written parent, or line 1."""
        probe = path
        while probe:
            if probe in self.locations:
                return self.locations[probe]
            cut = max(probe.rfind("."), probe.rfind("["))
            probe = probe[:cut] if cut > 0 else ""
        return self.locations.get("", Location(self.file, 1, 1))
