"""The key tables of cluster.yaml: the one description of every key.

The validator (``walk.py``), the JSON Schema (``schema.py``) and the docs' key table
are all generated from these tables, so they cannot drift apart. Checks that a
table cannot express (cross-key rules, instance facts) live in ``checks.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

import clusterkit.spec.model as model
from clusterkit.node import autostop_policy as policy

_HEX = "([0-9a-f]{8}|[0-9a-f]{17})"
REGION_RE = r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]{1,2}$"
INSTANCE_TYPE_RE = (r"^[a-z][a-z0-9-]*[0-9][a-z0-9-]*\."
                    r"(nano|micro|small|medium|large|[0-9]*xlarge|metal(-[0-9a-z]+)?)$")
MOUNT_RE = r"^/[A-Za-z0-9._/-]*$"
# An ODCR or Capacity Block id, or a Capacity Reservation resource group's ARN (the
# group's region is its fourth field: checks.py holds it to the spec's).
RESERVATION_RE = (r"^(cr-([0-9a-f]{8}|[0-9a-f]{17})|arn:aws[a-z-]*:resource-groups:"
                  r"[a-z0-9-]+:[0-9]{12}:group/[A-Za-z0-9_.-]{1,128})$")
USER_RE = r"^[a-z_][a-z0-9_-]{0,31}$"  # ssh.user and the --user option
# Characters no one-line value can hold: C0 and C1 controls (newline, tab, NUL, ESC ...),
# DEL, the Unicode line and paragraph separators and the bidirectional overrides (which
# make a value print other than it reads). Written as regex escapes: the same text is a
# Python and an ECMA-262 (JSON Schema) character class.
_CONTROLS = r"\x00-\x08\x0b-\x1f\x7f-\x9f\u2028-\u202e\u2066-\u2069"
_ONE_LINE = _CONTROLS + r"\t\n"
# What else a value that reaches ssh_config or a local command line must not hold:
# quotes and backslash (ssh_config's quoting), $ and ` (shell and ${VAR} expansion),
# % (ssh's %-tokens in IdentityFile and -i).
_SHELLISH = "\"'`$\\\\"
LOCAL_FILE_RE = rf"^(?!-)[^{_ONE_LINE}{_SHELLISH}%]+$"
NODE_PATH_RE = rf"^(?!-)[^{_ONE_LINE}{_SHELLISH}]+$"
CHECKPOINT_DIR_RE = rf"^(/|~|s3://)[^{_ONE_LINE}{_SHELLISH}]*$"
PYTHON_RE = r"^(?!-)[A-Za-z0-9_./~+=:,@-]+( [A-Za-z0-9_./~+=:,@-]+)*$"
KEY_NAME_RE = r"^[ !#%&()*+,./0-9:;<=>?@A-Z\[\]^_a-z{|}~-]{1,255}$"
_CONTROL_NAMES = {"\n": "a newline", "\t": "a tab", "\r": "a carriage return",
                  "\x00": "a NUL byte", "\x1b": "an escape character (ESC)"}


class Chars(Enum):
    """Which characters a string key may hold, beyond its pattern."""

    LINE = "line"  # one line: no control character at all
    TEXT = "text"  # text for a shell on the nodes: tabs and newlines, no other control

    @property
    def regex(self) -> str:
        return rf"^[^{_ONE_LINE if self is Chars.LINE else _CONTROLS}]*$"


def bad_char(value: str, chars: Chars = Chars.LINE) -> tuple[int, str] | None:
    """The first character of ``value`` that ``chars`` refuses, as (index, its name)."""
    found = re.search(f"[{_ONE_LINE if chars is Chars.LINE else _CONTROLS}]", value)
    if found is None:
        return None
    char = found.group()
    return found.start(), _CONTROL_NAMES.get(char, f"the control character U+{ord(char):04X}")


KMS_KEY_RE = (r"^([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|mrk-[0-9a-f]{32}|"
              r"alias/[A-Za-z0-9/_-]{1,250}|"
              r"arn:aws[a-z-]*:kms:[a-z0-9-]+:[0-9]{12}:(key/[A-Za-z0-9-]+|alias/[A-Za-z0-9/_-]+))$")


@dataclass(frozen=True)
class Key:
    """One key: its JSON-ish type, documentation and the limits the validator enforces.

    type: string | integer | number | boolean | object (fixed keys) | array |
    map (free keys, values described by ``items``) | text (string or number, kept as text).
    """

    type: str
    doc: str
    default: Any = None
    required: bool = False
    enum: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    pattern: str | None = None
    what: str | None = None  # what ``pattern`` means, for messages ("an AMI id")
    example: str | None = None
    max_length: int | None = None
    min_items: int | None = None
    unique: bool = False
    items: Key | None = None
    keys: Mapping[str, Key] | None = None
    key_pattern: str | None = None
    exclusive: tuple[str, ...] = ()  # object: at most one of these keys
    chars: Chars = Chars.LINE  # string and text values, whether or not a pattern is set
    # object: a scalar written in place of the section stands for this key of it
    # (``autostop: 30m`` is ``autostop: {idle: 30m}``); false (YAML's off, no) turns it off
    shorthand: str | None = None


def _obj(doc: str, keys: dict[str, Key], **kw: Any) -> Key:
    return Key("object", doc, keys=keys, **kw)


def _id(doc: str, prefix: str, what: str, example: str) -> Key:
    return Key("string", doc, pattern=f"^{prefix}-{_HEX}$",
               what=f"{what} ({prefix}- and 8 or 17 hex digits)", example=example)


def _bounded(doc: str, default: float, minimum: float, maximum: float) -> Key:
    """A number (seconds, minutes) with its default and the range it must lie in."""
    return Key("number", doc, default=default, minimum=minimum, maximum=maximum)


def _mount(doc: str, default: str) -> Key:
    return Key("string", doc, default=default, pattern=MOUNT_RE, max_length=255,
               what="an absolute path (/ then letters, digits, . _ - /)", example=default)


IMAGE = _obj("The machine image: an AMI id, or the newest AMI whose name matches.", {
    "id": _id("AMI id; wins over name/owner.", "ami", "an AMI id", "ami-0123456789abcdef0"),
    "name": Key("string", "AMI name filter (* wildcards), newest match is used.",
                default=model.Image.name, max_length=128),
    "owner": Key("string", "Owner of the AMI for the name filter.", default="amazon",
                 pattern=r"^(amazon|aws-marketplace|self|[0-9]{12})$",
                 what="amazon, aws-marketplace, self or a 12-digit account id",
                 example="amazon"),
}, exclusive=("id", "name"))

ROOT_VOLUME = _obj("Root EBS volume of every node.", {
    "size_gb": Key("integer", "Size in GiB.", default=200, minimum=8, maximum=16384),
    "type": Key("string", "EBS volume type.", default="gp3", enum=model.ROOT_VOLUME_TYPES),
})

MASTER = _obj("The master (node 0), where it differs from the other nodes.", {
    "market": Key("string", "The master's market (default: nodes.market's): on-demand keeps "
                  "the master, its job coordination and its client connections when spot "
                  "workers are reclaimed.", enum=model.MASTER_MARKETS, example="on-demand"),
})

NODES = _obj("The machines: how many, which types, which market.", {
    "count": Key("integer", "Number of nodes (node 0 is the master).", default=1, minimum=1,
                 maximum=100000),
    "instance_types": Key("array", "Instance types the nodes may be (a set, not an order of "
                          "preference): new nodes take the offer with the lowest $ per "
                          "GPU-hour (types without GPUs: per vCPU-hour), list order breaking "
                          "ties; with GPU types listed, types without GPUs are never used "
                          "(validate warns).",
                          required=True, min_items=1, unique=True,
                          items=Key("string", "An EC2 instance type.", pattern=INSTANCE_TYPE_RE,
                                    what="an EC2 instance type (family.size)",
                                    example="p4d.24xlarge")),
    "market": Key("string", "spot, on-demand, spot first then on-demand, or capacity-block "
                  "(the Capacity Block capacity_reservation names); with an ODCR "
                  "capacity_reservation, unset means on-demand.", default="spot",
                  enum=model.MARKETS),
    "capacity_reservation": Key(
        "string", "An On-Demand Capacity Reservation (cr-…) or a resource group of them "
        "(its ARN) every node launches into; with market capacity-block, the block's "
        "reservation id. `plan` reads it, `up` refuses one that cannot hold the nodes; "
        "`down` never touches it.", pattern=RESERVATION_RE, max_length=256,
        what="a capacity reservation id (cr- and 17 hex digits) or a resource-groups ARN "
        "(arn:aws:resource-groups:REGION:ACCOUNT:group/NAME)",
        example="cr-0123456789abcdef0"),
    "master": MASTER,
    "max_price": Key("number", "Highest $/hour per node for spot (unset: on-demand price).",
                     minimum=0, exclusive_minimum=True, maximum=1000),
    "image": IMAGE,
    "placement_group": Key("boolean", "Launch into a cluster placement group.", default=True),
    "root_volume": ROOT_VOLUME,
    "allow_large": Key("boolean", f"Allow more than {model.SANE_NODE_LIMIT} nodes.",
                       default=False),
    "containers": Key("boolean", "The nodes run containers (Docker): instance metadata "
                      "answers one network hop more (hop limit 2, else 1).", default=False),
}, required=True)

SSH = _obj("How clusterkit and you log in to the nodes.", {
    "key_name": Key("string", "EC2 key pair name (its private key in your ssh-agent).",
                    max_length=255, pattern=KEY_NAME_RE, example="my-key",
                    what="an EC2 key pair name (printable ASCII without quotes, $, ` or \\)"),
    "user": Key("string", "Login user of the image.", default="ubuntu",
                pattern=USER_RE, what="a Unix user name (lowercase letters, digits, _ and -, "
                "up to 32)", example="ubuntu"),
    "identity_file": Key("string", "Private key file (unset: use the ssh-agent). Written "
                         "into ssh's config: no quotes, $, backquotes, backslashes or %.",
                         max_length=4096,
                         pattern=LOCAL_FILE_RE, example="~/.ssh/id_ed25519",
                         what="a local file path (no quotes, $, `, \\, %, control characters "
                         "or leading -; spaces are allowed)"),
    "allowed_cidr": Key("string", "Who may reach port 22 (unset: your public address /32).",
                        pattern=r"^[0-9a-fA-F:.]+/[0-9]{1,3}$", what="a CIDR block",
                        example="203.0.113.7/32"),
    "port": Key("integer", "SSH port on the nodes.", default=22, minimum=1, maximum=65535),
})

SCRATCH = _obj("RAID-0 over the instance-store NVMe disks, rebuilt at every boot.", {
    "mount": _mount("Mount path.", "/scratch"),
    "raid0": Key("boolean", "Stripe all instance-store disks (false: first disk only).",
                 default=True),
})

EFS = _obj("Shared EFS file system; no file_system_id means clusterkit creates one.", {
    "file_system_id": _id("Existing file system to mount.", "fs", "an EFS file system id", "fs-0123456789abcdef0"),
    "mount": _mount("Mount path.", "/efs"),
    "deletion_policy": Key("string", "What `down` does with a file system it created.",
                           default="retain", enum=model.EFS_DELETION_POLICIES),
    "tls": Key("boolean", "Mount with TLS (amazon-efs-utils' mount.efs, installed where "
               "missing); false: plain NFS, unencrypted in transit.", default=True),
})

DATASET = _obj("One EBS volume per node cloned from a snapshot, mounted read-only.", {
    "snapshot": _id("EBS snapshot holding the dataset.", "snap", "a snapshot id", "snap-0123456789abcdef0"),
    "mount": _mount("Mount path.", "/data"),
    "volume_type": Key("string", "EBS volume type.", default="gp3", enum=model.VOLUME_TYPES),
    "iops": Key("integer", "Provisioned IOPS (gp3 3000-80000, io1 100-64000, io2 100-256000).",
                minimum=100, maximum=256000),
    "throughput": Key("integer", "gp3 throughput in MiB/s (125-2000).", minimum=125,
                      maximum=2000),
    "initialization_rate": Key("integer", "Volume initialization rate from the snapshot, "
                               "MiB/s (100-300).", minimum=100, maximum=300),
    "size_gb": Key("integer", "Size of each node's volume in GiB (unset: the snapshot's "
                   "size; smaller than the snapshot is refused).", minimum=1, maximum=65536),
})

STORAGE = _obj("Disks and file systems on every node; each part is off unless written.", {
    "scratch": SCRATCH,
    "efs": EFS,
    "dataset": DATASET,
    "kms_key": Key("string", "KMS key (id, ARN or alias/NAME) that encrypts the dataset "
                   "snapshots, volumes and EFS clusterkit makes (unset: the AWS-managed key).",
                   pattern=KMS_KEY_RE, max_length=2048,
                   what="a KMS key id, key ARN, alias/NAME or alias ARN",
                   example="alias/clusterkit"),
})

AUTOSTOP = _obj("Shut the nodes down after this long idle (no job, no SSH session with a "
                "terminal); `autostop: 30m` is short for `{idle: 30m}`, `off` turns it off.", {
    "idle": Key("string", "How long the cluster must be idle: 20s, 30m, 2h, 1h30m (10s..30d).",
                default="30m", pattern=policy.DURATION_PATTERN, max_length=32,
                what="a duration (a number and s, m, h or d: 20s, 30m, 1h30m)", example="30m"),
    "action": Key("string", "What the idle nodes do: terminate, or stop (on-demand only; "
                  "EC2 terminates spot nodes either way).", default="terminate",
                  enum=policy.ACTIONS),
}, shorthand="idle")

TRAIN = _obj("The distributed job `clusterkit train` starts.", {
    "framework": Key("string", "mxnet (parameter server) or torchrun.", default="mxnet",
                     enum=model.FRAMEWORKS),
    "command": Key("string", "Training command run by every worker (shell text on the "
                   "nodes: quotes and newlines allowed).", max_length=8192, chars=Chars.TEXT),
    "workdir": Key("string", "Directory the command runs in (relative: synced from the "
                   "spec's directory, which it must stay inside).", default="~",
                   max_length=4096, pattern=NODE_PATH_RE, example="/efs/work",
                   what="a directory path (no quotes, $, `, \\, control characters or "
                   "leading -)"),
    "env": Key("map", "Extra environment variables of every process.",
               key_pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
               items=Key("text", "Value (numbers are kept as text).", max_length=4096,
                         chars=Chars.TEXT)),
    "servers_per_node": Key("integer", "MXNet parameter servers per node.", default=1,
                            minimum=0, maximum=64),
    "workers_per_node": Key("integer", "Workers (torchrun: processes) per node; 0 = one per "
                            "GPU.", default=1, minimum=0, maximum=64),
    "python": Key("string", "Python interpreter on the nodes.", default="python3",
                  max_length=4096, pattern=PYTHON_RE, example="python3",
                  what="an interpreter, optionally with options (letters, digits, "
                  ". _ / ~ + = : , @ - and single spaces)"),
    "checkpoint_signal": Key("string", "Signal every process of the job gets when a node's "
                             "spot interruption notice comes: save a checkpoint (SIGTERM "
                             "follows after checkpoint_grace).", default="SIGUSR1",
                             enum=model.CHECKPOINT_SIGNALS),
    "checkpoint_grace": _bounded("Seconds between the checkpoint signal and SIGTERM, "
                                 "cut short to end 10 s before the instance goes (the notice "
                                 "comes two minutes ahead).", 90, 0, 3600),
    "checkpoint_dir": Key("string", "Where the training script saves its checkpoints and "
                          "resumes from ($CLUSTERKIT_CHECKPOINT_DIR): storage that outlives "
                          "a node (EFS, or an s3:// prefix). Left in place by a recovery.",
                          max_length=4096, pattern=CHECKPOINT_DIR_RE, example="/efs/ckpt",
                          what="an absolute path, a ~ path or an s3:// prefix (no quotes, "
                          "$, `, \\, control characters)"),
    "max_recoveries": Key("integer", "Times a lost node (spot notice, instance gone, silent "
                          "for node_timeout) is replaced and the job restarted from its "
                          "checkpoint (`train --max-recoveries`); 0: the job fails.",
                          default=0, minimum=0, maximum=100),
    "node_timeout": _bounded("Seconds a node may stay silent before the job counts it "
                             "lost.", 60, 5, 3600),
    "prelaunch_on_rebalance": Key("boolean", "On a spot node's rebalance recommendation, "
                                  "launch and bootstrap its replacement at once as a "
                                  "standby (when recoveries are allowed).", default=True),
    "standby_minutes": _bounded("Minutes a standby waits for its node's interruption "
                                "notice before it is terminated.", 30, 1, 1440),
    "sample_interval": _bounded("Seconds between two metric samples on each node "
                                "(GPUs, the job's CPU, I/O, samples/s: `clusterkit top`).", 2, 0.5, 60),
    "throughput_pattern": Key("string", "Regular expression with one group that captures "
                              "the samples/s in a line of the job's log, for a script that "
                              "prints neither MXNet's `Speed: N samples/sec` nor `N "
                              "samples/s`.", max_length=256,
                              example="throughput=([0-9.]+)"),
    "stall_after": _bounded("Seconds with no progress line in the job's logs and idle "
                            "GPUs (while its processes live) before the job counts as stalled "
                            "and gets the checkpoint signal.", 600, 30, 86400),
    "gpu_health_every": _bounded("Seconds between two reads of each node's GPU health "
                                 "(`nvidia-smi -q`, the kernel log's Xid lines) while a job runs; "
                                 "a node whose GPUs a reset would not fix is handled like a spot "
                                 "interruption: checkpoint, stop, and with max_recoveries "
                                 "replaced. 0: never read.", 60, 0, 86400),
    "stop_on_stall": Key("boolean", "Stop a stalled job (after the checkpoint signal and "
                         "checkpoint_grace), so a hung run stops billing.", default=False),
    "max_cost": Key("number", "Dollars the job may spend (`train --max-cost`): every "
                    "node it uses, standbys and replacements too, at the prices they were "
                    "launched at; before it crosses the cap the job gets the checkpoint "
                    "signal and stops as `budget` (docs/howto/spending-cap.md).",
                    minimum=0, exclusive_minimum=True, maximum=1000000),
    "preflight": Key("boolean", "Check every node before the job starts (`train "
                     "--preflight`): GPUs, DCGM, EFA, the dataset volume's read rate and an "
                     "all-reduce; a failing node is replaced while max_recoveries allows, "
                     "else the job does not start.", default=False),
    "elastic": _obj("A torchrun job that goes on with the nodes it has while a lost one is "
                    "replaced (torchrun --nnodes MIN:nodes.count, c10d rendezvous on the "
                    "master); the master's own loss restarts the job as without it. "
                    "framework: torchrun only (MXNet's dist_sync cannot change its worker "
                    "count).", {
        "min": Key("integer", "Fewest nodes the job trains on; below it the job stops and "
                   "waits for replacements (train.max_recoveries).", required=True,
                   minimum=1, maximum=4096),
        "max_restarts": Key("integer", "Times torchrun restarts the workers after a "
                            "failure (a lost node is one; a node joining costs none).",
                            default=3, minimum=0, maximum=1000),
    }),
    "packages": Key("array", "pip packages installed on the nodes, e.g. mxnet-cu112.",
                    unique=True,
                    items=Key("string", "A pip requirement.",
                              pattern=r"^[A-Za-z0-9][A-Za-z0-9._\[\],<>=!~+* -]*$",
                              what="a pip requirement", example="mxnet-cu112==1.9.1",
                              max_length=256)),
})

NETWORK = _obj("The network between the nodes.", {
    "efa": Key("string", "Elastic Fabric Adapter: auto gives every node of an EFA-capable "
               "type all the EFA interfaces it supports (p4d 4, p5 32), true requires them "
               "(a type without EFA is an error), false launches plain networking.",
               default="auto", enum=model.EFA_MODES),
})

SPEC = _obj("A clusterkit cluster.", {
    "name": Key("string", "Cluster name; every AWS resource is tagged with it.", required=True,
                pattern=r"^[A-Za-z]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$",
                what="a name of letters, digits and dashes starting with a letter (max 63)",
                example="imagenet"),
    "region": Key("string", "AWS region of the cluster.", required=True, pattern=REGION_RE,
                  what="an AWS region name", example="us-east-1"),
    "regions": Key("array", "Regions the spot search may use; `region` is always first.",
                   unique=True, items=Key("string", "An AWS region.", pattern=REGION_RE,
                                          what="an AWS region name", example="us-west-2")),
    "nodes": NODES,
    "ssh": SSH,
    "storage": STORAGE,
    "train": TRAIN,
    "autostop": AUTOSTOP,
    "network": NETWORK,
    "tags": Key("map", "Extra tags on every AWS resource.",
                key_pattern=r"^(?!aws:|clusterkit:)[A-Za-z0-9 _.:/=+@-]{1,128}$",
                items=Key("text", "Tag value.", max_length=256)),
})


def walk_keys(key: Key = SPEC, path: str = "") -> Iterator[tuple[str, Key]]:
    """Every (path, Key) in the table, depth first; array items as ``path[]``, map values
    as ``path.*``."""
    yield path, key
    if key.keys:
        for name, child in key.keys.items():
            yield from walk_keys(child, f"{path}.{name}" if path else name)
    elif key.items is not None:
        yield from walk_keys(key.items, f"{path}[]" if key.type == "array" else f"{path}.*")
