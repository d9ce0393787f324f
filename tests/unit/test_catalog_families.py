"""The families clusterkit treats as fully catalogued really are in the catalog, size
for size: an error for a missing size must never hide a type the catalog holds."""

from __future__ import annotations

from clusterkit.catalog import families, instances


def test_complete_families_match_the_catalog():
    for family, sizes in families.COMPLETE_FAMILIES.items():
        listed = {t.name for t in instances.all_types() if t.name.split(".")[0] == family}
        assert listed == {f"{family}.{s}" for s in sizes}, family


def test_not_offered_suggests_sizes_of_the_same_family():
    assert families.not_offered("g5.21xlarge")[:2] == ["g5.2xlarge", "g5.24xlarge"]
    assert families.not_offered("g5.xlarge") is None
    assert families.not_offered("c5.9xlarge") is None
    assert families.not_offered("p4de.metal") == ["p4de.24xlarge"]
