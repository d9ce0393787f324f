"""What every typed wire record shares: stdlib only, Python >= 3.8, PURE.

A wire record is a frozen dataclass that crosses from a node to the client or back (a
file in a job dir, a line a node program prints): ``job.json``, ``state.json``, the
outcome, the recovery record, the report, the observer's frame, the sampler's sample.
Each has a ``KIND`` (its name in errors), a ``VERSION`` (its schema's, written as ``"v"``
in every record) and one ``to_json``/``from_json``; ``from_json`` starts with
``version_of``, which refuses a record written by a newer program than this one (a
client newer than its nodes' programs, or the reverse) with an error naming the file,
the node and both versions. A record with no ``"v"`` is version 1 (as written before
versions were kept).

Shipped in every bundle that ships a record (``bundle``), imported by the client as
``clusterkit.node.wire``."""

from __future__ import annotations

VERSION_KEY = "v"


class WireError(ValueError):
    """A record this program cannot read: not an object, or of another schema version."""

    def __init__(self, kind: str, where: str, message: str, hint: str = ""):
        self.kind, self.where, self.hint = kind, where, hint
        super().__init__(f"{where}: {kind} {message}" + (f" ({hint})" if hint else ""))


def version_of(data: object, kind: str, known: int, where: str) -> dict:
    """``data`` as a dict once its version is one this program reads (1..``known``);
    ``where`` names the file and the node ("node 2 (worker-1): /var/lib/.../state.json")."""
    if not isinstance(data, dict):
        raise WireError(kind, where, f"is not a JSON object but {type(data).__name__}")
    found = data.get(VERSION_KEY, 1)
    if not isinstance(found, int) or isinstance(found, bool) or found < 1:
        raise WireError(kind, where, f"has an unreadable schema version {found!r}")
    if found > known:
        raise WireError(kind, where, f"is schema version {found}, newer than this "
                        f"program reads ({known})",
                        "the client and the node's programs differ: `clusterkit up` "
                        "ships the client's programs to every node again")
    return data


def stamped(kind_version: int, fields: dict) -> dict:
    """``fields`` with the schema version first, as every ``to_json`` writes it."""
    return {VERSION_KEY: kind_version, **fields}


def as_int(value: object, default: int | None = None) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def as_float(value: object, default: float | None = None) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return float(value) if ok else default


def as_str(value: object, default: str | None = None) -> str | None:
    return value if isinstance(value, str) else default


def as_dict(value: object) -> dict | None:
    return dict(value) if isinstance(value, dict) else None


def as_list(value: object) -> list:
    return list(value) if isinstance(value, list) else []


def as_sizes(value: object) -> tuple:
    """An elastic job's size changes as written ([epoch, nodes] pairs: state.json's
    ``sizes``, the report's): (epoch, nodes) tuples; what is not that is left out."""
    found = []
    for item in as_list(value):
        if isinstance(item, list) and len(item) == 2:
            at, n = as_float(item[0]), as_int(item[1])
            if at is not None and n is not None:
                found.append((at, n))
    return tuple(found)
