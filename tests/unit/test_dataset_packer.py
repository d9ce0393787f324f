"""dataset.packer.check_options: what `pack` refuses before it reads or writes anything
(exit 2), as data: options in, the refusal's words out (None: accepted)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clusterkit.dataset.codec import CodecOptions
from clusterkit.dataset.listing import ListOptions
from clusterkit.dataset.packer import PackOptions, check_options
from clusterkit.errors import UsageError

BASE = PackOptions(prefix="data/train", root="images", make_list=True, num_thread=1,
                   lists=ListOptions(), codec=CodecOptions())
CASES = [
    ({}, None),
    ({"prefix": "data/"}, "names a directory"),
    ({"prefix": "/"}, "names a directory"),
    ({"prefix": "train"}, None),
    ({"lists": {"train_ratio": 1.5}}, "--train-ratio 1.5 is outside 0-1"),
    ({"lists": {"test_ratio": -0.1}}, "--test-ratio -0.1 is outside 0-1"),
    ({"lists": {"train_ratio": 0.8, "test_ratio": 0.5}}, "add up to more than 1"),
    ({"lists": {"train_ratio": 0.8, "test_ratio": 0.2}}, None),
    ({"lists": {"train_ratio": 1.0, "test_ratio": 0.5}}, None),  # im2rec: all to train
    ({"codec": {"quality": 0}}, "--quality 0 is outside 1-100"),
    ({"codec": {"quality": 101}}, "--quality 101 is outside 1-100"),
    ({"codec": {"quality": 1}}, None),
    ({"codec": {"quality": 100}}, None),
]


def _options(change: dict) -> PackOptions:
    parts = {key: replace(getattr(BASE, key), **value) if isinstance(value, dict) else value
             for key, value in change.items()}
    return replace(BASE, **parts)


@pytest.mark.parametrize(("change", "refused"), CASES, ids=lambda v: str(v))
def test_check_options(change: dict, refused: str | None) -> None:
    if refused is None:
        check_options(_options(change))
        return
    with pytest.raises(UsageError, match=refused) as caught:
        check_options(_options(change))
    assert caught.value.exit_code == 2 and caught.value.hint
