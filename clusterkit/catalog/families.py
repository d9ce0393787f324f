"""Which instance types AWS offers, as far as the shipped catalog can tell. PURE.

The catalog does not list every EC2 type. For the families below it lists every size
AWS sells, so a size of one of these families that the catalog lacks (``g5.21xlarge``)
is not a type AWS offers. Any other type the catalog lacks (a new family, or a size of a
family the catalog holds only in part, such as ``c5.4xlarge``) may well exist.
"""

from __future__ import annotations

import difflib

from clusterkit.catalog import instances

# family -> every size AWS offers (the catalog's instances.json holds each one;
# tests/unit/test_catalog_families.py checks that)
COMPLETE_FAMILIES: dict[str, tuple[str, ...]] = {
    "g4dn": ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "metal"),
    "g5": ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge",
           "48xlarge"),
    "g6": ("xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge",
           "48xlarge"),
    "p3": ("2xlarge", "8xlarge", "16xlarge"),
    "p3dn": ("24xlarge",),
    "p4d": ("24xlarge",),
    "p4de": ("24xlarge",),
    "p5": ("4xlarge", "48xlarge"),
    "p5e": ("48xlarge",),
}


def not_offered(name: str) -> list[str] | None:
    """Close matches when ``name`` is a size AWS does not offer of a family the catalog
    lists completely (best first, at least one); None when the type may exist."""
    family, _, size = name.partition(".")
    sizes = COMPLETE_FAMILIES.get(family)
    if sizes is None or size in sizes:
        return None
    same_family = [f"{family}.{s}" for s in sizes]
    close = difflib.get_close_matches(name, same_family, 3, 0.6)
    return close or difflib.get_close_matches(name, same_family, 1, 0.0)


def close_matches(name: str, n: int = 3) -> list[str]:
    """Catalog types spelled like ``name``."""
    return difflib.get_close_matches(name, [t.name for t in instances.all_types()], n)
