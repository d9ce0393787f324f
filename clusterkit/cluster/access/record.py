"""The local record of a cluster: where `up` put it, so `status`, `down`, `exec` and
`ssh` know the region without a search.

``<state>/clusters/NAME/cluster.json`` (state dir: ``statedir``) holds the name, the
regions `up` may have created things in (the spec's), the region the nodes run in, the
stack name, a hash of the spec, and the created / updated times. Written atomically
(temp file + rename). It is a hint, never the truth: tags are. A missing or unreadable
record means "search every enabled region".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from clusterkit import statedir
from clusterkit.plan.stack import stack_name
from clusterkit.spec.model import Spec

FILE = "cluster.json"
VERSION = 1


@dataclass(frozen=True)
class Record:
    name: str
    region: str  # where the nodes run
    regions: tuple[str, ...]  # every region `up` may have created something in
    stack: str
    spec_hash: str
    created: str  # ISO 8601, UTC
    updated: str

    @property
    def search(self) -> list[str]:
        """The regions to look in: the nodes' region first, then the others."""
        return list(dict.fromkeys((self.region, *self.regions)))


def path(name: str) -> Path:
    return statedir.cluster_dir(name) / FILE


def _plain(value: Any) -> Any:
    """A JSON-able copy of a spec value (dataclasses, mappings, tuples)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)
                if f.name not in ("file", "locations")}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def spec_hash(spec: Spec) -> str:
    """sha256 of the spec's values (not of its file: comments and layout do not count)."""
    text = json.dumps(_plain(spec), sort_keys=True, default=str)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def read(name: str) -> Record | None:
    """The record of cluster ``name``, or None when there is none (or it is unreadable)."""
    try:
        data = json.loads(path(name).read_text())
        return Record(name=data["name"], region=data["region"],
                      regions=tuple(data.get("regions") or ()), stack=data.get("stack", ""),
                      spec_hash=data.get("spec_hash", ""), created=data.get("created", ""),
                      updated=data.get("updated", ""))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_atomic(target: Path, text: str) -> None:
    """``statedir.write_private`` into a directory made 0700 from the state root down."""
    statedir.private_dir(target.parent)  # 0700 from the state root down, however made
    statedir.write_private(target, text)


def save(spec: Spec, region: str, now: datetime | None = None) -> Record:
    """Write (or update) the record of ``spec``'s cluster, running in ``region``."""
    stamp = (now or datetime.now(timezone.utc)).isoformat(timespec="seconds")
    old = read(spec.name)
    regions = tuple(dict.fromkeys((*spec.regions, *(old.regions if old else ()), region)))
    rec = Record(name=spec.name, region=region, regions=regions, stack=stack_name(spec.name),
                 spec_hash=spec_hash(spec), created=old.created if old else stamp,
                 updated=stamp)
    data = {"version": VERSION, **dataclasses.asdict(rec), "regions": list(rec.regions)}
    write_atomic(path(spec.name), json.dumps(data, indent=2) + "\n")
    return rec
