"""Closed value sets shared by every layer: markets, instance states, node roles. PURE.

Each member is its own string (``Market.SPOT == "spot"``), so tags, JSON output and
AWS API parameters carry the same text as before, and values read back from AWS or a
spec file compare equal to the members.
"""

from __future__ import annotations

from enum import Enum


class _Text(str, Enum):
    """A str-valued enum that prints and formats as its value (``f"{Market.SPOT}"`` is
    ``spot``, not ``Market.SPOT``)."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class Market(_Text):
    """How one instance is billed."""

    SPOT = "spot"
    ON_DEMAND = "on-demand"
    CAPACITY_BLOCK = "capacity-block"  # in a Capacity Block for ML, paid upfront


class MarketPolicy(_Text):
    """The spec's ``nodes.market``: which markets a launch may use, in order."""

    SPOT = "spot"
    ON_DEMAND = "on-demand"
    SPOT_THEN_ON_DEMAND = "spot-then-on-demand"
    CAPACITY_BLOCK = "capacity-block"  # the block nodes.capacity_reservation names

    @property
    def markets(self) -> tuple[Market, ...]:
        """The markets this policy allows, in the order they are tried."""
        if self is MarketPolicy.SPOT_THEN_ON_DEMAND:
            return (Market.SPOT, Market.ON_DEMAND)
        return (Market(self.value),)


class ReservationKind(_Text):
    """A capacity reservation's kind (DescribeCapacityReservations' ReservationType)."""

    ODCR = "default"  # an On-Demand Capacity Reservation
    CAPACITY_BLOCK = "capacity-block"  # a Capacity Block for ML


class ReservationState(_Text):
    """A capacity reservation's state (botocore's CapacityReservationState)."""

    ACTIVE = "active"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    PENDING = "pending"
    FAILED = "failed"
    SCHEDULED = "scheduled"
    PAYMENT_PENDING = "payment-pending"
    PAYMENT_FAILED = "payment-failed"
    ASSESSING = "assessing"
    DELAYED = "delayed"
    UNSUPPORTED = "unsupported"
    CANCELLING = "cancelling"
    UNAVAILABLE = "unavailable"


class InstanceState(_Text):
    """EC2's instance state names."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    STOPPED = "stopped"
    SHUTTING_DOWN = "shutting-down"
    TERMINATED = "terminated"


class Role(_Text):
    """A node's part in the cluster: rank 0 is the master (scheduler, SSH gateway)."""

    MASTER = "master"
    WORKER = "worker"
    PENDING = "pending"  # the role tag of a launch filling both kinds of slot, until the
    # role tags follow (one CreateTags per role)


# Every state but terminated: the instance still exists and belongs to the cluster.
LIVE_STATES = (InstanceState.PENDING, InstanceState.RUNNING, InstanceState.STOPPING,
               InstanceState.STOPPED, InstanceState.SHUTTING_DOWN)
STOPPED_STATES = (InstanceState.STOPPING, InstanceState.STOPPED)  # `up` starts these again
# States EC2 bills the instance in (a stopped instance pays for its volumes only).
BILLED_STATES = (InstanceState.PENDING, InstanceState.RUNNING, InstanceState.STOPPING,
                 InstanceState.SHUTTING_DOWN)
# A node in one of these while a launch waits for it has been lost (spot reclaim, stop).
DEAD_STATES = (InstanceState.SHUTTING_DOWN, InstanceState.TERMINATED, InstanceState.STOPPING,
               InstanceState.STOPPED)


class StackAction(_Text):
    """What `up` does to the cluster's stack."""

    CREATE = "create"
    RECREATE = "recreate"  # delete a dead (failed first create) stack, then create it
    UPDATE = "update"
    NONE = "none"


class KeyPairAction(_Text):
    """What `up` does about the EC2 key pair."""

    IMPORT = "import"  # the user's public key, as clusterkit-<cluster>
    NONE = "none"


class NodeAction(_Text):
    """What `up` does to one node (or, LAUNCH, one missing index)."""

    LAUNCH = "launch"
    START = "start"  # stopped: started again
    TERMINATE = "terminate"  # surplus, or a duplicate of an index
    RETAG = "retag"  # its role tag written
    KEEP = "keep"  # nothing
