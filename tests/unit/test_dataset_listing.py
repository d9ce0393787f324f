"""`.lst` making and reading, im2rec.py's rules (the byte comparison with the real
im2rec.py is in tests/integration/test_pack_im2rec.py)."""

from __future__ import annotations

import os
import random

from clusterkit.dataset.listing import (
    Item,
    ListOptions,
    format_item,
    list_images,
    make_lists,
    parse_line,
    read_list,
    split_lists,
)


def touch(path: str, data: bytes = b"x") -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as fh:
        fh.write(data)


def items(n: int) -> list[Item]:
    return [Item(i, f"f{i}.jpg", (float(i % 3),)) for i in range(n)]


def test_recursive_labels_follow_sorted_walk_and_skip_dirs_without_images(tmp_path) -> None:
    root = str(tmp_path)
    touch(f"{root}/b/2.JPG")
    touch(f"{root}/b/1.png")
    touch(f"{root}/a/notes.txt")  # a class dir with no images gets no label
    touch(f"{root}/c/x.jpeg")
    touch(f"{root}/top.jpg")
    found, classes = list_images(root, True)
    assert [(i.index, i.path, i.labels) for i in found] == [
        (0, "top.jpg", (0.0,)), (1, "b/1.png", (1.0,)), (2, "b/2.JPG", (1.0,)),
        (3, "c/x.jpeg", (2.0,))]
    assert classes == [(".", 0), ("b", 1), ("c", 2)]


def test_flat_listing_takes_only_root_files_with_label_zero(tmp_path) -> None:
    touch(f"{tmp_path}/sub/a.jpg")
    touch(f"{tmp_path}/z.png")
    touch(f"{tmp_path}/a.gif")
    found, classes = list_images(str(tmp_path), False)
    assert [(i.path, i.labels) for i in found] == [("z.png", (0.0,))]
    assert classes == []


def test_exts_are_case_insensitive_both_ways(tmp_path) -> None:
    touch(f"{tmp_path}/a.JPG")
    touch(f"{tmp_path}/b.jpg")
    assert len(list_images(str(tmp_path), False, (".JPG",))[0]) == 2


def test_symlinked_dirs_are_followed_and_loops_walked_once(tmp_path) -> None:
    touch(f"{tmp_path}/data/real/a.jpg")
    os.symlink(f"{tmp_path}/data/real", f"{tmp_path}/data/link")
    os.symlink(f"{tmp_path}/data", f"{tmp_path}/data/real/loop")
    found, classes = list_images(f"{tmp_path}/data", True)
    assert [i.path for i in found] == ["link/a.jpg", "real/a.jpg"]
    assert [c for c, _ in classes] == ["link", "real"]


def test_shuffle_is_pythons_seed_100_shuffle() -> None:
    expected = items(50)
    random.seed(100)
    random.shuffle(expected)
    [(name, got)] = split_lists("p", items(50), ListOptions())
    assert name == "p.lst" and got == expected


def test_chunks_and_ratios_follow_im2rec_arithmetic() -> None:
    opts = ListOptions(chunks=3, train_ratio=0.6, test_ratio=0.2, shuffle=False)
    out = dict(split_lists("p", items(10), opts))
    # chunk_size 4: test 0, train 2 (int(2.4)), val the rest -- last chunk has only 2 items
    assert list(out) == ["p_0_test.lst", "p_0_val.lst", "p_0_train.lst", "p_1_test.lst",
                         "p_1_val.lst", "p_1_train.lst", "p_2_test.lst", "p_2_val.lst",
                         "p_2_train.lst"]
    assert [i.index for i in out["p_0_train.lst"]] == [0, 1]
    assert [i.index for i in out["p_0_val.lst"]] == [2, 3]
    assert [i.index for i in out["p_2_train.lst"]] == [8, 9]
    assert out["p_2_val.lst"] == []


def test_train_ratio_without_val() -> None:
    out = dict(split_lists("p", items(10), ListOptions(train_ratio=0.7, test_ratio=0.3,
                                                       shuffle=False)))
    assert list(out) == ["p_test.lst", "p_train.lst"]
    assert len(out["p_test.lst"]) == 3 and len(out["p_train.lst"]) == 7


def test_format_and_parse_round_trip_with_spaces_and_unicode(tmp_path) -> None:
    item = Item(3, "dir é/ a b.jpg", (1.0, 2.5))
    assert format_item(item) == "3\t1.000000\t2.500000\tdir é/ a b.jpg\n"
    assert parse_line(format_item(item)) == item


def test_parse_line_reports_bad_lines() -> None:
    assert "three" in parse_line("0\tfoo.jpg\n")
    assert "parse" in parse_line("x\t1.0\tfoo.jpg\n")
    assert parse_line("7\t2.000000\tfoo.jpg\t\n") == Item(7, "foo.jpg", (2.0,))


def test_make_lists_writes_files_atomically(tmp_path) -> None:
    touch(f"{tmp_path}/img/c/a.jpg")
    written, _ = make_lists(f"{tmp_path}/out", f"{tmp_path}/img", ListOptions(recursive=True))
    assert written == [f"{tmp_path}/out.lst"]
    assert sorted(os.listdir(tmp_path)) == ["img", "out.lst"]
    assert [e for _, e in read_list(written[0])] == [Item(0, "c/a.jpg", (0.0,))]
