"""Bad and odd inputs, and Ctrl-C, through the real `clusterkit pack` CLI (subprocesses).

The byte comparison with im2rec.py here covers every file both tools pack; the only
intended difference is a truncated JPEG, which im2rec.py packs (libjpeg fills the missing
part with grey) and clusterkit reports and skips.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys
import time

import cv2
import numpy as np
import pytest

from clusterkit.dataset.recordio import decode_records, read_index
from tests.unit.dataset_images import cmyk_jpeg, exif_rotated_jpeg, photo, write_image

IM2REC = os.path.join(os.path.dirname(importlib.util.find_spec("mxnet").origin),
                      "tools", "im2rec.py")
GOOD = ["good/a.jpg", "good/gray.jpg", "good/rgba.png", "good/cmyk.jpg", "good/deep.png",
        "good/ünï cödé.jpg", "good/with space.png", "good/exif.jpg", "alias/linked.jpg"]
BAD = ["bad/zero.jpg", "bad/trunc.jpg", "bad/trunc.png", "bad/text.jpg", "bad/noise.png"]


def run_ck(args: list[str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "clusterkit", "pack", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> str:
    base = tmp_path_factory.mktemp("corpus")
    root = base / "root"
    write_image(f"{root}/good/a.jpg", photo(30, 40, 1))
    write_image(f"{root}/good/gray.jpg", photo(30, 40, 2, channels=1))
    write_image(f"{root}/good/rgba.png", photo(20, 30, 3, channels=4))
    (root / "good/cmyk.jpg").write_bytes(cmyk_jpeg())
    write_image(f"{root}/good/deep.png", photo(20, 20, 4).astype(np.uint16) * 257)
    write_image(f"{root}/good/ünï cödé.jpg", photo(25, 35, 5))
    write_image(f"{root}/good/with space.png", photo(35, 25, 6))
    (root / "good/exif.jpg").write_bytes(exif_rotated_jpeg(photo(20, 40, 7)))
    write_image(f"{base}/elsewhere/linked.jpg", photo(30, 30, 8))
    os.symlink(base / "elsewhere", root / "alias")
    os.makedirs(root / "bad")
    (root / "bad/zero.jpg").write_bytes(b"")
    full = cv2.imencode(".jpg", photo(60, 80, 9))[1].tobytes()
    (root / "bad/trunc.jpg").write_bytes(full[: len(full) // 2])
    png = cv2.imencode(".png", photo(60, 80, 10))[1].tobytes()
    (root / "bad/trunc.png").write_bytes(png[: len(png) // 2])
    (root / "bad/text.jpg").write_text("this is not an image\n")
    (root / "bad/noise.png").write_bytes(np.random.default_rng(0).bytes(500))
    os.makedirs(root / "empty_class")
    (root / "empty_class/README.txt").write_text("no images here")
    return str(root)


def records_by_key(prefix: str) -> dict[int, bytes]:
    with open(prefix + ".rec", "rb") as fh:
        data = fh.read()
    offsets = dict(read_index(prefix + ".idx"))
    payloads = {off: p for off, p in decode_records(data)}
    return {key: payloads[off] for key, off in offsets.items()}


def test_bad_files_reported_once_and_skipped_rest_identical_to_im2rec(corpus, tmp_path) -> None:
    work = str(tmp_path)
    assert run_ck(["--list", "--recursive", "out", corpus], work).returncode == 0
    lines = (tmp_path / "out.lst").read_text(encoding="utf-8").splitlines()
    lst = {line.split("\t")[-1]: int(line.split("\t")[0]) for line in lines}
    assert sorted(lst) == sorted(GOOD + BAD)
    proc = run_ck(["--resize", "16", "--num-thread", "2", "out", corpus], work)
    assert proc.returncode == 0, proc.stderr
    for rel in BAD:
        assert proc.stderr.count(os.path.join(corpus, rel) + ":") == 1, (rel, proc.stderr)
    assert sum(line.startswith("skipped ") for line in proc.stderr.splitlines()) == len(BAD)
    assert f"{len(BAD)} bad files skipped in total" in proc.stderr
    ours = records_by_key(str(tmp_path / "out"))
    assert sorted(ours) == sorted(lst[g] for g in GOOD)

    os.makedirs(tmp_path / "ref")
    os.link(tmp_path / "out.lst", tmp_path / "ref/out.lst")
    ref = subprocess.run([sys.executable, IM2REC, "--resize", "16", "--num-thread", "2", "out",
                          corpus], cwd=tmp_path / "ref", capture_output=True, text=True)
    assert ref.returncode == 0, ref.stderr
    theirs = records_by_key(str(tmp_path / "ref/out"))
    assert {k: theirs[k] for k in ours} == ours
    assert set(theirs) - set(ours) <= {lst["bad/trunc.jpg"]}


@pytest.mark.parametrize("sig, code, said", [(signal.SIGINT, 130, "interrupted"),
                                              (signal.SIGTERM, 143, "terminated")],
                         ids=["SIGINT", "SIGTERM"])
def test_interrupted_pack_leaves_no_complete_looking_output(tmp_path, sig, code, said) -> None:
    root = tmp_path / "img"
    write_image(f"{root}/big.png", photo(300, 400, 11))
    with open(tmp_path / "out.lst", "w") as fh:
        fh.writelines(f"{i}\t0.000000\tbig.png\n" for i in range(5000))
    # SIGINT as a terminal gives it: a suite started in the background of a shell (which
    # starts background jobs with SIGINT ignored) must not pass that on to the pack
    proc = subprocess.Popen([sys.executable, "-m", "clusterkit", "pack", "--encoding", ".png",
                             "--quality", "9", "--num-thread", "2", "out", str(root)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        _interrupt(proc, tmp_path, sig, code, said)
    finally:
        if proc.poll() is None:  # a failed check leaves no pack running on
            proc.kill()
            proc.wait()


def _interrupt(proc: subprocess.Popen, tmp_path, sig: int, code: int, said: str) -> None:
    def started() -> bool:
        """The temporary .rec is there: the pack has opened its output and is encoding."""
        return any(n.startswith("out.rec.tmp-") for n in os.listdir(tmp_path))

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not started():
        time.sleep(0.05)
    if not started():
        proc.kill()
        pytest.fail("pack never started writing")
    assert proc.poll() is None, "pack finished before it could be interrupted"
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert said in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["img", "out.lst"]


def test_missing_list_is_a_usage_error(tmp_path) -> None:
    os.makedirs(tmp_path / "img")
    proc = run_ck(["out", str(tmp_path / "img")], str(tmp_path))
    assert proc.returncode == 2 and "no .lst file found" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(("args", "said"), [
    (["--quality", "0", "out", "img"], "'--quality': 0 is not in the range 1<=x<=100"),
    (["--quality", "101", "out", "img"], "'--quality': 101 is not in the range"),
    (["--list", "--train-ratio", "1.5", "out", "img"], "'--train-ratio': 1.5 is not in"),
    (["--list", "--test-ratio", "-0.1", "out", "img"], "'--test-ratio': -0.1 is not in"),
    (["--list", "--train-ratio", "0.8", "--test-ratio", "0.5", "out", "img"],
     "add up to more than 1"),
    (["--list", "out/", "img"], "names a directory"),
], ids=["quality-0", "quality-101", "train-1.5", "test-negative", "sum", "prefix-slash"])
def test_out_of_range_options_exit_2_writing_nothing(tmp_path, args, said) -> None:
    write_image(f"{tmp_path}/img/a.jpg", photo(20, 20, 1))
    os.makedirs(tmp_path / "out")
    proc = run_ck(args, str(tmp_path))
    assert proc.returncode == 2 and said in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(os.listdir(tmp_path)) == ["img", "out"] and not os.listdir(tmp_path / "out")


def test_an_unreadable_directory_is_skipped_with_its_reason_and_no_bar_in_a_pipe(
        tmp_path) -> None:
    """Root reads through directory permissions, so as root (CI) the pack runs without the
    capabilities that allow it (util-linux `setpriv` drops them from the bounding set)."""
    write_image(f"{tmp_path}/img/ok/a.jpg", photo(20, 20, 1))
    write_image(f"{tmp_path}/img/locked/b.jpg", photo(20, 20, 2))
    (tmp_path / "img/locked").chmod(0o000)
    argv = [sys.executable, "-m", "clusterkit", "pack", "--list", "--recursive", "out", "img"]
    if os.geteuid() == 0:
        argv = ["setpriv", "--bounding-set", "-dac_override,-dac_read_search", *argv]
    try:
        listed = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    finally:
        (tmp_path / "img/locked").chmod(0o755)
    assert listed.returncode == 0, listed.stderr
    skipped = f"skipped directory {tmp_path}/img/locked: Permission denied"
    assert skipped in listed.stderr
    assert (tmp_path / "out.lst").read_text().count("\n") == 1
    packed = run_ck(["out", "img"], str(tmp_path))  # stderr is a pipe here
    assert packed.returncode == 0, packed.stderr
    assert packed.stderr.splitlines()[0] == "out.lst"
    assert "━" not in packed.stderr and "\r" not in packed.stderr
