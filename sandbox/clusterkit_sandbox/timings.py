"""AWS's own timings, for a sandbox that waits as AWS does (`clusterkit sandbox start
--timings aws[:SCALE]`): one table, each figure with its source (``../shared/REFERENCE.md``
collects them), scaled by SCALE (default 0.1) so tests and benches stay short. The
sandbox sleeps these in timers and request threads: a wait costs no CPU.

Off by default: the untimed sandbox answers every call at once and boots a node as soon
as it can, which is what the test suite wants. PURE (data and arithmetic)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

DEFAULT_SCALE = 0.1
PROFILE = "aws"


class Wait(str, Enum):
    """A wait AWS imposes, apart from the API round trip (its value is the ``what`` of
    the timeline's wait lines)."""

    INSTANCE_RUNNING = "instance pending -> running"
    SSH_ANSWERS = "instance running -> sshd answers"
    STACK_SECURITY_GROUP = "stack resource AWS::EC2::SecurityGroup created"
    STACK_INGRESS = "stack resource AWS::EC2::SecurityGroupIngress created"
    STACK_PLACEMENT_GROUP = "stack resource AWS::EC2::PlacementGroup created"
    STACK_IAM_ROLE = "stack resource AWS::IAM::Role created"
    STACK_INSTANCE_PROFILE = "stack resource AWS::IAM::InstanceProfile created"
    STACK_LAUNCH_TEMPLATE = "stack resource AWS::EC2::LaunchTemplate created"
    STACK_EFS = "stack resource AWS::EFS::FileSystem created"
    STACK_OTHER = "stack resource of another type created"
    STACK_DELETE = "stack resource deleted"
    VOLUME_FROM_SNAPSHOT = "volume from a snapshot creating -> available"
    VOLUME_ATTACH = "volume attaching -> attached"
    SNAPSHOT_COMPLETE = "snapshot pending -> completed"
    EFS_FILE_SYSTEM = "EFS file system creating -> available"
    EFS_MOUNT_TARGET = "EFS mount target creating -> available"
    IAM_PROFILE_PROPAGATION = "IAM instance profile made -> known to EC2"
    IMAGE_AVAILABLE = "AMI pending -> available"
    PACKAGE_DOWNLOAD = "a package downloaded, per GB"


@dataclass(frozen=True)
class Figure:
    seconds: float
    source: str


# An API call's round trip by call family, client in the region (a far client adds
# 80-230 ms a round trip: REFERENCE.md).
ROUND_TRIPS: Mapping[str, Figure] = MappingProxyType({
    "describe": Figure(0.15, "EC2 API round trip in-region, typical (no published SLA; "
                             "daemonology.net 2021-08-12 times whole calls at 0.1-0.3 s)"),
    "mutate": Figure(0.3, "EC2/CloudFormation write calls (no published SLA; same runs)"),
    "run_instances": Figure(1.5, "RunInstances call, one run: daemonology.net 2021-08-12 "
                                 "\"EC2 boot time benchmarking\""),
})
WAITS: Mapping[Wait, Figure] = MappingProxyType({
    Wait.INSTANCE_RUNNING: Figure(5.0, "pending -> running ~5 s (daemonology.net "
                                       "2021-08-12; 16-18 s with a 15 s-polling waiter, an "
                                       "upper bound: brevdev/ec2-coldboot-research)"),
    Wait.SSH_ANSWERS: Figure(5.0, "running -> SSH accepts 3-6 s with cloud-init (brevdev/"
                                  "ec2-coldboot-research; daemonology.net)"),
    Wait.STACK_SECURITY_GROUP: Figure(1.0, "~1 s from CREATE_IN_PROGRESS to CREATE_COMPLETE "
                                           "in a stack's events (amazon-archives/"
                                           "ecs-mxnet-example #4)"),
    Wait.STACK_INGRESS: Figure(1.0, "no published figure: a stated small default, as a "
                                    "security group's"),
    Wait.STACK_PLACEMENT_GROUP: Figure(1.0, "no published figure: a stated small default, "
                                            "as a security group's"),
    Wait.STACK_IAM_ROLE: Figure(12.0, "IAM role in CloudFormation ~12 s (pgarbe/tatsu-hubot "
                                      "#1; 20 s in one stack's events: unbounce/iidy #145)"),
    Wait.STACK_INSTANCE_PROFILE: Figure(120.0, "instance profile in CloudFormation ~120 s: "
                                               "AWS's \"hardcoded 2min delay\" (its forum, "
                                               "quoted in hashicorp/terraform #15341; "
                                               "pgarbe/tatsu-hubot #1)"),
    Wait.STACK_LAUNCH_TEMPLATE: Figure(1.0, "no published figure: a stated small default, "
                                            "as a security group's"),
    Wait.STACK_EFS: Figure(12.0, "EFS file system creating -> available ~12 s (turbot/"
                                 "steampipe-plugin-aws PR #426)"),
    Wait.STACK_OTHER: Figure(1.0, "no published figure: a stated small default for a type "
                                  "without its own row"),
    Wait.STACK_DELETE: Figure(2.0, "no published figure for deleting a stack's resource: a "
                                   "stated default per resource, dependents first"),
    Wait.VOLUME_FROM_SNAPSHOT: Figure(5.0, "no measurement published (\"a few seconds\" "
                                           "before a new volume can be attached: fog/fog PR "
                                           "#1758): a stated default"),
    Wait.VOLUME_ATTACH: Figure(7.0, "attach + mount cycle ~7 s (crewjam/withebs README)"),
    Wait.SNAPSHOT_COMPLETE: Figure(180.0, ">= ~3 min even for a small volume (aws/"
                                          "aws-sdk-ruby #978; 16 min for 50 GB gp3: pingcap/"
                                          "docs-tidb-operator PR #2108); no SLA"),
    Wait.EFS_FILE_SYSTEM: Figure(12.0, "EFS file system creating -> available ~12 s (turbot/"
                                       "steampipe-plugin-aws PR #426)"),
    Wait.EFS_MOUNT_TARGET: Figure(60.0, "EFS mount target creating -> available > 60 s, "
                                        "sometimes > 10 min (turbot/steampipe-plugin-aws PR "
                                        "#426; hashicorp/terraform-provider-aws #15278): its "
                                        "lower bound"),
    Wait.IAM_PROFILE_PROPAGATION: Figure(10.0, "an instance profile made (or given its "
                                               "role) through IAM's API is refused by EC2 "
                                               "(InvalidParameterValue, \"Invalid IAM "
                                               "Instance Profile\") for \"typically 5-10 "
                                               "seconds\" (hashicorp/terraform PR #2037); "
                                               "\"~10 seconds\" (hashicorp/terraform PR "
                                               "#8516): the upper figure"),
    Wait.IMAGE_AVAILABLE: Figure(300.0, "CreateImage pending -> available: \"sometimes aws "
                                        "can take several minutes to create an image\" "
                                        "beyond a 120 s timeout (Nanocloud/nanocloud PR "
                                        "#357); boto3's ImageAvailable waiter allows 10 "
                                        "min (40 x 15 s): 5 min, a stated middle figure"),
    Wait.PACKAGE_DOWNLOAD: Figure(20.0, "a GB from the package index at 50 MB/s: a large "
                                        "wheel (torch) from PyPI on a cloud machine, "
                                        "\"between 50 and 100 MB/s\" (invoke-ai/InvokeAI "
                                        "#3146, 2023-04-08): the lower figure"),
})
# A stack resource's type -> its creation figure (any other type: Wait.STACK_OTHER).
STACK_RESOURCES: Mapping[str, Wait] = MappingProxyType({
    "AWS::EC2::SecurityGroup": Wait.STACK_SECURITY_GROUP,
    "AWS::EC2::SecurityGroupIngress": Wait.STACK_INGRESS,
    "AWS::EC2::PlacementGroup": Wait.STACK_PLACEMENT_GROUP,
    "AWS::IAM::Role": Wait.STACK_IAM_ROLE,
    "AWS::IAM::InstanceProfile": Wait.STACK_INSTANCE_PROFILE,
    "AWS::EC2::LaunchTemplate": Wait.STACK_LAUNCH_TEMPLATE,
    "AWS::EFS::FileSystem": Wait.STACK_EFS,
})
READ_PREFIXES = ("Describe", "List", "Get", "Head")


def stack_wait(resource_type: str) -> Wait:
    """The wait that creating a stack resource of ``resource_type`` takes."""
    return STACK_RESOURCES.get(resource_type, Wait.STACK_OTHER)


def family(operation: str) -> str:
    """The round-trip family of an API operation (``RunInstances`` -> run_instances)."""
    if operation == "RunInstances":
        return "run_instances"
    return "describe" if operation.startswith(READ_PREFIXES) else "mutate"


@dataclass(frozen=True)
class Timings:
    """The table in force: ``scale`` times every figure (0: the untimed sandbox)."""

    scale: float = 0.0
    round_trips: Mapping[str, Figure] = field(default_factory=lambda: ROUND_TRIPS)
    waits: Mapping[Wait, Figure] = field(default_factory=lambda: WAITS)

    @property
    def on(self) -> bool:
        return self.scale > 0

    def round_trip(self, operation: str) -> float:
        """Seconds the sandbox's HTTP server holds a call of ``operation`` back."""
        return self.scale * self.round_trips[family(operation)].seconds if self.on else 0.0

    def wait(self, what: Wait) -> float:
        return self.scale * self.waits[what].seconds if self.on else 0.0

    def stack_create(self, resource_type: str) -> float:
        """Seconds CloudFormation takes to create a resource of ``resource_type``."""
        return self.wait(stack_wait(resource_type))

    def stack_delete(self) -> float:
        """Seconds CloudFormation takes to delete a resource (one figure for every type)."""
        return self.wait(Wait.STACK_DELETE)

    def to_json(self) -> dict[str, Any]:
        """The table as `sandbox status --json` shows it: AWS's figure, the scaled one,
        and the source of each."""
        def row(fig: Figure) -> dict[str, Any]:
            return {"aws_s": fig.seconds, "sandbox_s": round(fig.seconds * self.scale, 4),
                    "source": fig.source}

        return {"profile": PROFILE if self.on else "none", "scale": self.scale,
                "round_trips": {k: row(v) for k, v in self.round_trips.items()},
                "waits": {w.value: row(f) for w, f in self.waits.items()}}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Timings:
        """The table ``to_json`` wrote, its figures included (a table with a figure of
        its own, as a test may start, reaches the daemon whole)."""
        if not data:
            return cls()
        waits = {w.value: w for w in Wait}
        return cls(float(data.get("scale", 0.0)),
                   _figures(data.get("round_trips"), ROUND_TRIPS, {k: k for k in ROUND_TRIPS}),
                   _figures(data.get("waits"), WAITS, waits))


def _figures(rows: Any, default: Mapping[Any, Figure],
             keys: Mapping[str, Any]) -> Mapping[Any, Figure]:
    """``default`` with each figure that ``rows`` (to_json's rows) states for a known key."""
    table = dict(default)
    for name, row in rows.items() if isinstance(rows, Mapping) else ():
        if name in keys and isinstance(row, Mapping) and isinstance(row.get("aws_s"),
                                                                     (int, float)):
            table[keys[name]] = Figure(float(row["aws_s"]), str(row.get("source", "")))
    return MappingProxyType(table)


def parse(text: str | None) -> Timings:
    """``--timings`` as given: None or "none" -> off; "aws" -> AWS's at DEFAULT_SCALE;
    "aws:SCALE" -> AWS's times SCALE (0 < SCALE <= 10). ValueError says what is wrong."""
    if text is None or text.strip().lower() in ("", "none", "off"):
        return Timings()
    name, _, scale = text.strip().partition(":")
    if name != PROFILE:
        raise ValueError(f"--timings {text!r}: the profile is `{PROFILE}` (or `none`), "
                         f"with an optional :SCALE, e.g. {PROFILE}:0.1")
    try:
        value = float(scale) if scale else DEFAULT_SCALE
    except ValueError:
        raise ValueError(f"--timings {text!r}: SCALE must be a number, e.g. "
                         f"{PROFILE}:0.1") from None
    if not 0 < value <= 10:
        raise ValueError(f"--timings {text!r}: SCALE must be above 0 and at most 10")
    return Timings(value)
