"""`clusterkit pack` against the real im2rec.py from the mxnet wheel, and MXNet's readers.

im2rec.py runs unmodified as a subprocess with this interpreter (it works on Python 3.11 with
numpy<1.24); clusterkit runs in-process through its CLI. Outputs must be byte-identical.
"""

from __future__ import annotations

import filecmp
import importlib.util
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli
from tests.unit.dataset_images import make_tree, photo, write_image

pytestmark = pytest.mark.mxnet



def _im2rec_script() -> str:
    """im2rec.py of the installed mxnet (found when called: without mxnet the `mxnet`
    marker skips these tests, or fails them under CI, instead of breaking collection)."""
    return os.path.join(os.path.dirname(importlib.util.find_spec("mxnet").origin),
                        "tools", "im2rec.py")


def im2rec(args: list[str], cwd: str) -> str:
    proc = subprocess.run([sys.executable, _im2rec_script(), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def ck(args: list[str], cwd: str) -> str:
    old = os.getcwd()
    os.chdir(cwd)
    try:
        result = CliRunner().invoke(cli, ["pack", *args], catch_exceptions=False)
    finally:
        os.chdir(old)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("images"))
    make_tree(root, classes=4, per_class=6)
    write_image(f"{root}/flat_a.jpg", photo(20, 30, 99))
    write_image(f"{root}/flat_b.PNG", photo(30, 20, 98))
    os.makedirs(f"{root}/class_empty")
    return root


def outputs(d: str) -> dict[str, bytes]:
    return {name: open(os.path.join(d, name), "rb").read() for name in sorted(os.listdir(d))}


@pytest.mark.parametrize("flags", [
    ["--recursive"],
    [],
    ["--recursive", "--no-shuffle"],
    ["--recursive", "--chunks", "3", "--train-ratio", "0.6", "--test-ratio", "0.2"],
    ["--recursive", "--train-ratio", "0.8", "--no-shuffle"],
    ["--recursive", "--chunks", "2", "--exts", ".png", ".jpeg"],
])
def test_list_mode_writes_the_same_lst_files(tree, tmp_path, flags) -> None:
    for tool in ("ref", "ck"):
        os.makedirs(tmp_path / tool)
    ref_out = im2rec([*flags, "--list", "out", tree], str(tmp_path / "ref"))
    ck_out = ck([*flags, "--list", "out", tree], str(tmp_path / "ck"))
    assert outputs(str(tmp_path / "ref")) == outputs(str(tmp_path / "ck"))
    assert len(outputs(str(tmp_path / "ck"))) >= 1
    assert ck_out == ref_out  # the class map im2rec prints


def pack_both(tree: str, tmp_path, flags: list[str], lst: str | None = None,
              ck_threads: str = "2") -> tuple[str, str]:
    dirs = []
    for tool in ("ref", "ck"):
        d = tmp_path / tool
        os.makedirs(d)
        if lst is None:
            ck(["--list", "--recursive", "out", tree], str(d))
        else:
            (d / "out.lst").write_text(lst)
        dirs.append(str(d))
    im2rec([*flags, "--num-thread", "2", "out", tree], dirs[0])
    ck([*flags, "--num-thread", ck_threads, "out", tree], dirs[1])
    for ext in (".lst", ".rec", ".idx"):
        assert filecmp.cmp(f"{dirs[0]}/out{ext}", f"{dirs[1]}/out{ext}", shallow=False), ext
    return dirs[0], dirs[1]


@pytest.mark.parametrize("flags", [
    [],
    ["--resize", "24"],
    ["--resize", "20", "--center-crop"],
    ["--quality", "60"],
    ["--encoding", ".png", "--quality", "3"],
    ["--color", "0"],
    ["--color", "-1", "--encoding", ".png"],
    ["--pass-through"],
])
def test_pack_mode_is_byte_identical(tree, tmp_path, flags) -> None:
    pack_both(tree, tmp_path, flags)


def test_single_thread_is_byte_identical_too(tree, tmp_path) -> None:
    pack_both(tree, tmp_path, ["--resize", "16"], ck_threads="1")


def test_pack_every_chunk_and_split_like_im2rec(tree, tmp_path) -> None:
    """Pack mode packs every `PREFIX*.lst` (here 2 chunks x train/val/test = 6 lists)."""
    flags = ["--recursive", "--chunks", "2", "--train-ratio", "0.5", "--test-ratio", "0.25"]
    for tool in ("ref", "ck"):
        os.makedirs(tmp_path / tool)
        ck([*flags, "--list", "out", tree], str(tmp_path / tool))
    im2rec(["--resize", "20", "--num-thread", "2", "out", tree], str(tmp_path / "ref"))
    ck(["--resize", "20", "--num-thread", "2", "out", tree], str(tmp_path / "ck"))
    ours = outputs(str(tmp_path / "ck"))
    assert len(ours) == 18 and ours == outputs(str(tmp_path / "ref"))


def test_pack_label_with_multi_label_lst(tree, tmp_path) -> None:
    lines = [f"{i}\t{i % 3}.000000\t{i * 0.5:f}\t-1.250000\tclass_{i % 4}/im0{i % 6}"
             f"{'.png' if i % 6 % 3 == 2 else '.jpg'}\n" for i in range(12)]
    ref, _ = pack_both(tree, tmp_path, ["--pack-label"], lst="".join(lines))
    import mxnet as mx

    rec = mx.recordio.MXIndexedRecordIO(f"{ref}/out.idx", f"{ref}/out.rec", "r")
    header, _ = mx.recordio.unpack(rec.read_idx(5))
    assert header.flag == 3 and list(header.label) == [2.0, 2.5, -1.25]


def test_mxnet_readers_read_every_record(tree, tmp_path) -> None:
    import mxnet as mx

    ck(["--list", "--recursive", "out", tree], str(tmp_path))
    ck(["--resize", "32", "--center-crop", "--num-thread", "2", "out", tree], str(tmp_path))
    lst = [line.split("\t") for line in (tmp_path / "out.lst").read_text().splitlines()]
    rec = mx.recordio.MXIndexedRecordIO(str(tmp_path / "out.idx"), str(tmp_path / "out.rec"), "r")
    assert sorted(rec.keys) == sorted(int(f[0]) for f in lst)
    for fields in lst:
        header, img = mx.recordio.unpack_img(rec.read_idx(int(fields[0])))
        assert header.label == float(fields[1]) and img.shape == (32, 32, 3)
    it = mx.io.ImageRecordIter(path_imgrec=str(tmp_path / "out.rec"), data_shape=(3, 32, 32),
                               batch_size=1)
    labels = [batch.label[0].asnumpy()[0] for batch in it]
    assert sorted(labels) == sorted(float(f[1]) for f in lst)
