"""A region's key pair and stack for `up`: read once, for the plan the user confirms,
then created or updated only where they differ.

The reads of a region (the stack as it is, the VPC, the AMI, whether the key pair
exists) are kept in a ``Reads`` until the confirmed plan is applied there, so applying
it does not make them again: on AWS each costs a round trip (50-300 ms) and counts
against the account's API rate. A region first met while launching (a fallback offer in
another region) is read then, and a region prepared once is read afresh if prepared
again (a launch retried after a failure).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterkit.aws import keypairs
from clusterkit.aws import stack as cfn
from clusterkit.cluster import stackops
from clusterkit.cluster.lookups import base_tags, facts, key_pair_missing
from clusterkit.cluster.runtime import Runtime
from clusterkit.events import Stage
from clusterkit.plan.stack import (
    Facts,
    key_pair_name,
    stack_action,
    stack_name,
    stack_parameters,
)
from clusterkit.remote.probe import local_public_key
from clusterkit.spec.model import Spec


@dataclass(frozen=True)
class RegionRead:
    """What the read calls said of one region."""

    current: dict[str, Any] | None  # the stack as it is (None: there is none)
    params: dict[str, str]  # the parameters it should have
    vpc_id: str
    key_pair_missing: bool  # clusterkit must import the user's public key there
    facts: Facts  # what ``params`` were made from besides the spec


@dataclass
class Reads:
    """The regions read during one `up`, and the SSH source its stack rule admits."""

    cidr: str
    regions: dict[str, RegionRead] = field(default_factory=dict)


def _read(rt: Runtime, spec: Spec, region: str, cidr: str) -> RegionRead:
    current = cfn.describe_stack(rt.session, region, stack_name(spec.name))
    found = facts(rt, spec, region, current=current["parameters"] if current else None,
                  ssh_cidr=cidr)
    return RegionRead(current, stack_parameters(spec, found), found.vpc_id,
                      key_pair_missing(rt, spec, region), found)


def read_region(rt: Runtime, spec: Spec, region: str, reads: Reads) -> RegionRead:
    """Read-only: ``region`` as the read calls say, kept in ``reads`` for applying."""
    if region not in reads.regions:
        reads.regions[region] = _read(rt, spec, region, reads.cidr)
    return reads.regions[region]


def prepare_region(rt: Runtime, spec: Spec, region: str, timeout: float,
                   reads: Reads) -> dict[str, Any]:
    """Key pair and stack in ``region``, created or updated only if they differ. The
    plan's read of the region is used once: what follows changes the region, so a later
    attempt there (a launch retried in another zone) reads it again."""
    read = reads.regions.pop(region, None) or _read(rt, spec, region, reads.cidr)
    if read.key_pair_missing:
        rt.started(Stage.KEY_PAIR,
                   f"importing your SSH public key as key pair {key_pair_name(spec.name)}")
        keypairs.import_key_pair(rt.session, region, key_pair_name(spec.name),
                                 local_public_key(spec.ssh.identity_file), base_tags(spec))
    current = read.current
    action = stack_action(current["status"] if current else None,
                          current["parameters"] if current else None, read.params)
    stack = stackops.deploy(rt, region, stack_name(spec.name), action, read.params,
                            base_tags(spec), timeout=timeout, current=current)
    stack["vpc_id"] = read.vpc_id
    return stack
