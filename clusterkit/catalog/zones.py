"""Zone kinds: regular Availability Zones, Local Zones and Wavelength Zones. PURE.

Local Zones (``use1-atl2-az1``, Atlanta) and Wavelength Zones (``usw2-wl1-sfo-wlz1``)
belong to a region but are usable only after the account opts in to their zone group
and the VPC has a subnet there. The spot search ranks such a zone only when
DescribeAvailabilityZones says the account opted in and the VPC has a subnet in it;
the offline plan cannot check either, so it never ranks one and says what it needs.
"""

from __future__ import annotations

import re
from enum import Enum


class ZoneType(str, Enum):
    AVAILABILITY_ZONE = "availability-zone"
    LOCAL_ZONE = "local-zone"
    WAVELENGTH_ZONE = "wavelength-zone"


_AZ_ID = re.compile(r"^[a-z]+[0-9]+-az[0-9]+$")  # use1-az4
_AZ_NAME = re.compile(r"^[a-z]{2}(-gov|-iso[a-z]*)?-[a-z]+-[0-9]+[a-z]$")  # us-east-1a
OFFLINE_NOTE = "not ranked offline"
NEEDS = "opt-in to its zone group and a subnet in the VPC"


def zone_type(zone: str, reported: str | None = None) -> ZoneType:
    """The kind of a zone, by the ZoneType AWS reported or else by its id/name shape."""
    if reported:
        try:
            return ZoneType(reported)
        except ValueError:
            return ZoneType.LOCAL_ZONE  # an unknown kind is not a regular AZ either
    if _AZ_ID.match(zone) or _AZ_NAME.match(zone):
        return ZoneType.AVAILABILITY_ZONE
    if "-wl" in zone:
        return ZoneType.WAVELENGTH_ZONE
    return ZoneType.LOCAL_ZONE


def label(kind: ZoneType) -> str:
    return {ZoneType.AVAILABILITY_ZONE: "Availability Zone", ZoneType.LOCAL_ZONE: "Local Zone",
            ZoneType.WAVELENGTH_ZONE: "Wavelength Zone"}[kind]


def zone_block(kind: ZoneType, *, opted_in: bool | None, has_subnet: bool | None) -> str:
    """Why a zone cannot be ranked, or "" when it can. ``None`` = not checked (offline)."""
    if kind is ZoneType.AVAILABILITY_ZONE:
        return ""
    if opted_in is None or has_subnet is None:
        return f"{label(kind)}: needs {NEEDS} ({OFFLINE_NOTE})"
    missing = [what for what, ok in (("opt-in to its zone group", opted_in),
                                     ("a subnet in the VPC", has_subnet)) if not ok]
    return f"{label(kind)}: needs {' and '.join(missing)}" if missing else ""
