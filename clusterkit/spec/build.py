"""Checked plain values -> the immutable ``Spec``. PURE.

Keys that were not written (or failed their check) take the dataclass defaults
of ``model.py``; the docs' key table (docs/reference/spec.md) and the JSON Schema show
the same defaults (a test holds the key tables to the dataclasses).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import clusterkit.spec.model as model
from clusterkit.kinds import MarketPolicy
from clusterkit.node.autostop_policy import duration_seconds
from clusterkit.spec.model import Location

PLACEHOLDER_NAME = "invalid"  # only in a Spec that is never returned to callers


def _given(d: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in (d or {}).items() if v is not None}


def _image(d: Mapping[str, Any] | None) -> model.Image:
    given = _given(d)
    if "id" in given and "name" not in given:
        given["name"] = None  # an explicit AMI id: no name filter
    return model.Image(**given)


def _nodes(d: Mapping[str, Any] | None) -> model.Nodes:
    given = _given(d)
    given["image"] = _image((d or {}).get("image"))
    given["root_volume"] = model.RootVolume(**_given(given.get("root_volume")))
    given["master"] = model.Master(**_given(given.get("master")))
    given["instance_types"] = tuple(given.get("instance_types", ()))
    if given.get("capacity_reservation") and "market" not in given:
        given["market"] = MarketPolicy.ON_DEMAND.value  # a reservation is on-demand capacity
    return model.Nodes(**given)


def _storage(d: Mapping[str, Any] | None) -> model.Storage:
    d = d or {}
    return model.Storage(
        scratch=model.Scratch(**_given(d["scratch"])) if "scratch" in d else None,
        efs=model.Efs(**_given(d["efs"])) if "efs" in d else None,
        dataset=model.Dataset(**_given(d["dataset"])) if "dataset" in d else None,
        kms_key=d.get("kms_key"),
    )


def _train(d: Mapping[str, Any] | None) -> model.Train:
    given = _given(d)
    given["env"] = MappingProxyType(dict(given.get("env", {})))
    given["packages"] = tuple(given.get("packages", ()))
    if "elastic" in given:
        given["elastic"] = model.Elastic(**_given(given["elastic"]))
    return model.Train(**given)


def _autostop(d: Any) -> model.Autostop | None:
    """The section (or its shorthand, already a section); False or idle ``off``: off
    (idle_s None); not written: None."""
    if d is None:
        return None
    idle = "off" if d is False else d.get("idle", "30m")
    if idle == "off":
        return model.Autostop(None, d.get("action", model.Autostop.action) if d else
                              model.Autostop.action)
    try:
        seconds = duration_seconds(idle)  # its range: checks.py, located
    except ValueError:  # walk.py refused its form already
        seconds = model.Autostop.idle_s
    return model.Autostop(seconds, d.get("action", model.Autostop.action))


def _regions(region: str, regions: list[str] | None) -> tuple[str, ...]:
    ordered = [region] + [r for r in (regions or []) if r != region]
    return tuple(ordered)


def build_spec(plain: Mapping[str, Any], locations: Mapping[str, Location],
               file: str) -> model.Spec:
    """Build the Spec; missing required values get placeholders (callers only return a
    Spec built from a walk without errors)."""
    region = plain.get("region") or "us-east-1"
    return model.Spec(
        name=plain.get("name") or PLACEHOLDER_NAME,
        region=region,
        regions=_regions(region, plain.get("regions")),
        nodes=_nodes(plain.get("nodes")),
        ssh=model.Ssh(**_given(plain.get("ssh"))),
        storage=_storage(plain.get("storage")),
        train=_train(plain["train"]) if "train" in plain else None,
        tags=MappingProxyType(dict(plain.get("tags") or {})),
        autostop=_autostop(plain.get("autostop")),
        network=model.Network(**_given(plain.get("network"))),
        file=file,
        locations=MappingProxyType(dict(locations)),
    )
