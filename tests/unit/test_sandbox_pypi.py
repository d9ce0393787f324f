"""clusterkit_sandbox.pypi: the nodes' package index answers pip's two requests (the
project's page, a file) from the shared wheels/ directory; timed, a file's download
sleeps its real size (sizes.json) at the sourced rate and records a wait line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from clusterkit_sandbox.pypi import Index, project
from clusterkit_sandbox.timed import Recorder, read_timeline
from clusterkit_sandbox.timings import Timings, Wait


def _index(tmp_path: Path, scale: float) -> tuple[Index, list[float]]:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "mxnet_cu112-1.9.1-py3-none-any.whl").write_bytes(b"wheel")
    (wheels / "numpy-1.26.4-py3-none-any.whl").write_bytes(b"numpy")
    (wheels / "sizes.json").write_text(json.dumps(
        {"mxnet_cu112-1.9.1-py3-none-any.whl": 499364355}))
    slept: list[float] = []

    def app(environ, start_response):
        raise AssertionError("not the index's path")

    return Index(app, wheels, Timings(scale=scale), Recorder(tmp_path / "timeline.jsonl"),
                 sleep=slept.append), slept


def test_the_project_page_links_each_of_its_files_with_its_hash(tmp_path):
    index, _ = _index(tmp_path, 0)
    assert project("mxnet_cu112-1.9.1-py3-none-any.whl") == "mxnet-cu112"
    code, kind, body = index.answer("simple/mxnet-cu112/")
    digest = hashlib.sha256(b"wheel").hexdigest()
    assert (code, kind) == (200, "text/html")
    assert (f'href="/pypi/files/mxnet_cu112-1.9.1-py3-none-any.whl#sha256={digest}"'
            in body.decode()) and "numpy" not in body.decode()
    assert index.answer("simple/torch/")[0] == 404
    assert index.answer("files/../../etc/passwd")[0] == 404


def test_a_timed_download_takes_the_real_size_at_the_rate(tmp_path):
    index, slept = _index(tmp_path, 0.5)
    assert index.answer("files/mxnet_cu112-1.9.1-py3-none-any.whl")[2] == b"wheel"
    per_gb = 0.5 * 20.0  # Wait.PACKAGE_DOWNLOAD at scale 0.5
    assert slept == [per_gb * 499364355 / 1e9]
    assert index.answer("files/numpy-1.26.4-py3-none-any.whl")[2] == b"numpy"
    assert slept[1] == per_gb * 5 / 1e9  # no size listed: the file's own
    lines = read_timeline(tmp_path / "timeline.jsonl")
    assert [(w["what"], w["resource"]) for w in lines] == [
        (Wait.PACKAGE_DOWNLOAD.value, "mxnet_cu112-1.9.1-py3-none-any.whl"),
        (Wait.PACKAGE_DOWNLOAD.value, "numpy-1.26.4-py3-none-any.whl")]


def test_untimed_nothing_waits(tmp_path):
    index, slept = _index(tmp_path, 0)
    assert index.answer("files/numpy-1.26.4-py3-none-any.whl")[0] == 200 and slept == []
