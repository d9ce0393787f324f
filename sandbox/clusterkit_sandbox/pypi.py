"""The sandbox's package index: a node reaches no network, so pip's index is the
endpoint's ``/pypi/simple/`` (PEP 503), serving the wheels in the shared directory's
``wheels/`` (``run/shared/wheels``: a test or bench puts them there). Timed, a file's
download takes its size at the sourced download rate (Wait.PACKAGE_DOWNLOAD, per GB),
the size being the real wheel's where ``wheels/sizes.json`` names one ({file: bytes}, as
``bench/packages_mxnet_cu112.json`` lists them), else the file's own; a sleep in the
request thread, no CPU, and a wait line in the timeline."""

from __future__ import annotations

import hashlib
import html
import json
import re
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from clusterkit_sandbox.timed import Recorder
from clusterkit_sandbox.timings import Timings, Wait

PREFIX = "/pypi/"
SIZES_FILE = "sizes.json"


def project(filename: str) -> str:
    """The normalized project name of a wheel's file name (PEP 503)."""
    return re.sub(r"[-_.]+", "-", filename.split("-", 1)[0]).lower()


class Index:
    """WSGI: ``/pypi/...`` answered here, anything else passed to ``app``."""

    def __init__(self, app: Callable[..., Iterable[bytes]], wheels: Path, timings: Timings,
                 recorder: Recorder, sleep: Callable[[float], None] = time.sleep) -> None:
        self.app, self.wheels, self.timings = app, wheels, timings
        self.recorder, self.sleep = recorder, sleep

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if not path.startswith(PREFIX):
            return self.app(environ, start_response)
        code, kind, body = self.answer(path[len(PREFIX):])
        start_response(f"{code} {'OK' if code == 200 else 'Not Found'}",
                       [("Content-Type", kind), ("Content-Length", str(len(body)))])
        return [body]

    def files(self) -> list[Path]:
        return sorted(self.wheels.glob("*.whl")) if self.wheels.is_dir() else []

    def answer(self, rest: str) -> tuple[int, str, bytes]:
        parts = [p for p in rest.split("/") if p]
        if len(parts) == 2 and parts[0] == "simple":
            links = "".join(
                f'<a href="/pypi/files/{html.escape(f.name)}#sha256='
                f'{hashlib.sha256(f.read_bytes()).hexdigest()}">{html.escape(f.name)}</a>\n'
                for f in self.files() if project(f.name) == parts[1].lower())
            if links:
                return 200, "text/html", f"<html><body>\n{links}</body></html>\n".encode()
        if len(parts) == 2 and parts[0] == "files":
            found = next((f for f in self.files() if f.name == parts[1]), None)
            if found is not None:
                return 200, "application/octet-stream", self.download(found)
        return 404, "text/plain", b"not in the sandbox's package index\n"

    def download(self, wheel: Path) -> bytes:
        """The file, after its modeled download time (timed)."""
        data = wheel.read_bytes()
        if self.timings.on:
            sizes_file = self.wheels / SIZES_FILE
            sizes = json.loads(sizes_file.read_text()) if sizes_file.is_file() else {}
            size = int(sizes.get(wheel.name, len(data)))
            start = time.time()
            self.sleep(self.timings.wait(Wait.PACKAGE_DOWNLOAD) * size / 1e9)
            self.recorder.add("wait", Wait.PACKAGE_DOWNLOAD.value, wheel.name, start,
                              time.time())
        return data
