"""node/observer.py, the node-side reader of a job's metrics, run as the client runs
it: ``python3 - VERB ...`` with the program on stdin, against job dirs in tmp_path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from clusterkit.cluster.jobs.top import OBSERVER_MODULES
from clusterkit.node import bundle
from clusterkit.node.frames import EXIT_UNREADABLE
from clusterkit.node.samples import Sample
from clusterkit.node.totals import Summary

SOURCE = bundle.program("observer.py", OBSERVER_MODULES)
CAPTURES = Path(__file__).parents[1] / "data" / "node-captures"  # copies of ../shared/data


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-", *args], input=SOURCE, capture_output=True,
                          timeout=30, check=False, env=env)


def _jobs(root: Path) -> Path:
    base = root / "var/lib/clusterkit/jobs"
    for job_id in ("j-20260101-120000-aaaa", "j-20260101-130000-bbbb"):
        (base / job_id).mkdir(parents=True)
    newest = base / "j-20260101-130000-bbbb"
    (newest / "metrics.1.jsonl").write_text('{"t": 1}\n{"t": 2}\n')
    (newest / "metrics.jsonl").write_text('{"t": 3}\n{cut\n[4]\n{"t": 4}\n')
    return base


def test_observe_gives_the_newest_jobs_samples_after_since_at_most_last(tmp_path: Path):
    _jobs(tmp_path)
    out = json.loads(_run("observe", "--root", str(tmp_path), "--since", "1.5").stdout)
    assert out["job_id"] == "j-20260101-130000-bbbb" and "health" not in out
    assert [s["t"] for s in out["samples"]] == [2, 3, 4]
    out = json.loads(_run("observe", "--root", str(tmp_path), "--last", "1").stdout)
    assert out["samples"] == [Sample(4.0).to_json()]  # an older sampler's line, as read
    out = json.loads(_run("observe", "--root", str(tmp_path), "--job",
                          "j-20260101-120000-aaaa").stdout)
    assert out == {"v": 1, "job_id": "j-20260101-120000-aaaa", "samples": []}


def test_observe_passes_the_jobs_state_json_on_as_written(tmp_path: Path):
    """The master of an elastic job keeps its size changes in state.json: the frame
    carries the file as written, which the client reads (issue 42: `top`)."""
    from clusterkit.node.frames import Frame
    from clusterkit.training.jobfiles import state_of

    newest = _jobs(tmp_path) / "j-20260101-130000-bbbb"
    written = {"v": 1, "job_id": newest.name, "state": "running", "updated": 130.5,
               "sizes": [[100.0, 3], [120.0, 2]]}
    (newest / "state.json").write_text(json.dumps(written))
    out = json.loads(_run("observe", "--root", str(tmp_path), "--last", "0").stdout)
    assert out["state"] == written
    frame = Frame.from_json(out, "master: observer frame")
    assert frame.state is not None and state_of(frame.state).sizes == ((100.0, 3), (120.0, 2))
    (newest / "state.json").write_text("{cut")  # being written: none this time
    assert "state" not in json.loads(_run("observe", "--root", str(tmp_path)).stdout)


def test_observe_refuses_a_job_id_that_is_a_path(tmp_path: Path):
    _jobs(tmp_path)
    done = _run("observe", "--root", str(tmp_path), "--job", "../../../etc")
    assert done.returncode == 2 and b"not a job id" in done.stderr


def test_health_gives_nvidia_smi_q_and_only_the_kernel_logs_gpu_lines(tmp_path: Path):
    """With `nvidia-smi` and `dmesg` on the PATH (stand-ins printing a real kernel log's
    Xid lines among others), `--health` gives the former whole and of the latter only
    the GPU lines; with neither, nulls."""
    xids = (CAPTURES / "xid-43-31-94.dmesg-T.driver-535.TRUNCATED.txt").read_text()
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "nvidia-smi").write_text("#!/bin/sh\necho 'Driver Version : 535.183.01'\n")
    (bindir / "dmesg").write_text("#!/bin/sh\necho '[1.0] usb 1-1: new device'\ncat <<'X'\n"
                                  + xids + "X\necho '[2.0] eth0: link up'\n")
    for tool in bindir.iterdir():
        tool.chmod(0o755)
    out = json.loads(_run("observe", "--root", str(tmp_path), "--health",
                          env={"PATH": f"{bindir}:/usr/bin:/bin"}).stdout)
    found = out["health"]
    assert found["smi_q"].strip() == "Driver Version : 535.183.01"
    kept = found["kernel_log"].splitlines()
    assert kept and all("NVRM" in line or "Xid" in line for line in kept)
    assert "usb" not in found["kernel_log"] and "eth0" not in found["kernel_log"]
    empty = tmp_path / "empty"
    empty.mkdir()
    out = json.loads(_run("observe", "--root", str(tmp_path), "--health",
                          env={"PATH": str(empty)}).stdout)
    assert out == {"v": 1, "job_id": None, "samples": [],
                   "health": {"smi_q": None, "kernel_log": None}}


def test_summary_gives_the_totals_and_the_kept_report(tmp_path: Path):
    (tmp_path / "summary.json").write_text('{"samples": 5}')  # an older supervisor's
    out = json.loads(_run("summary", str(tmp_path)).stdout)
    assert out == {"v": 1, "totals": Summary(samples=5.0).to_json(), "report": None}
    (tmp_path / "report.json").write_text('{"v": 1, "job_id": "j-1"}')
    out = json.loads(_run("summary", str(tmp_path), "--report", "report.json").stdout)
    assert out["report"] == {"v": 1, "job_id": "j-1"}
    out = json.loads(_run("summary", str(tmp_path / "none")).stdout)
    assert out == {"v": 1, "totals": None, "report": None}


def test_a_newer_record_is_refused_naming_its_file_and_both_versions(tmp_path: Path):
    """A job started by a newer client (its sampler, its supervisor) than this one: the
    observer says what it cannot read on stderr (the client names the node)."""
    base = _jobs(tmp_path)
    newest = base / "j-20260101-130000-bbbb"
    with (newest / "metrics.jsonl").open("a") as f:
        f.write('{"v": 2, "t": 5, "node": 1}\n')
    done = _run("observe", "--root", str(tmp_path))
    assert done.returncode == EXIT_UNREADABLE and not done.stdout
    said = done.stderr.decode()
    assert f"{newest}/metrics.jsonl: metrics sample is schema version 2" in said
    assert "newer than this program reads (1)" in said
    assert _run("observe", "--root", str(tmp_path), "--since", "4.5").returncode == \
        EXIT_UNREADABLE  # the newer one is among those asked for
    out = json.loads(_run("observe", "--root", str(tmp_path), "--last", "0").stdout)
    assert out["samples"] == []  # nothing asked: nothing read
    (newest / "summary.json").write_text('{"v": 7}')
    done = _run("summary", str(newest))
    assert done.returncode == EXIT_UNREADABLE
    assert "summary.json: job totals is schema version 7" in done.stderr.decode()


def test_it_parses_as_python_3_8():
    import ast

    from clusterkit.node import observer

    ast.parse(Path(observer.__file__).read_text(), feature_version=(3, 8))


def test_a_verb_it_does_not_know_prints_its_usage_and_exits_2():
    """Sent over stdin with its modules ahead of it, the program still has its own
    docstring as the usage (bundle.program keeps it as __doc__)."""
    done = _run("no-such-verb")
    assert done.returncode == 2, done.stderr
    assert "Verbs (each prints one frame" in done.stderr.decode()
