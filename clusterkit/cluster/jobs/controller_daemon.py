"""The recovery controller's own side, on the master (`clusterkit recovery-controller
DIR`, started by ``controller.start`` as the controller's own user): take the
directory's lock, serve the metadata proxy the master's fence sends every other user
to (``node/imdsproxy.py``), say where the AWS credentials come from (the master's
instance role: no other kind is accepted outside the sandbox), then follow and recover
the job as `train --attach` does, the job's logs dropped (they stay on the nodes) and
the controller's own lines in its log (``~/.clusterkit/controller/controller.log`` of
the login that started it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusterkit.aws.identity import OVERRIDE_ENV
from clusterkit.cluster.jobs import controller
from clusterkit.cluster.jobs.results import JobOutcome
from clusterkit.cluster.runtime import Runtime
from clusterkit.errors import ClusterkitError
from clusterkit.events import Reporter, Stage
from clusterkit.netguard import SANDBOX_ENV
from clusterkit.node import imdsfence, imdsproxy

LOCK_WAIT = 120.0  # seconds: a controller of the job this one replaced is ending
METADATA_ENDPOINT_ENV = "AWS_EC2_METADATA_SERVICE_ENDPOINT"  # botocore's; the sandbox's
ROLE_METHOD = "iam-role"  # botocore's name for credentials from the instance metadata


@contextlib.contextmanager
def holding(path: Path, wait: float = LOCK_WAIT) -> Iterator[None]:
    """The controller's lock (one controller per master), waited for up to ``wait`` s."""
    with open(path, "a") as handle:
        deadline = time.monotonic() + wait
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise ClusterkitError(f"another controller holds {path}",
                                          "is an earlier job's controller stuck?") from None
                time.sleep(0.5)
        yield


def credentials_source(rt: Runtime) -> str:
    """Where boto3 found credentials; refused unless the instance role gave them (the
    sandbox's metadata serves that role too, so the rule holds there)."""
    found = rt.session.get_credentials()
    method = getattr(found, "method", None) if found is not None else None
    if method != ROLE_METHOD:
        raise ClusterkitError(f"the controller's AWS credentials come from {method or 'nowhere'}"
                              f", not the master's instance role",
                              "the master needs the stack's controller instance profile")
    return method


def serve_metadata(rt: Runtime, values: dict[str, Any]) -> None:
    """The metadata proxy the fence sends the master's other users to (``imdsproxy``:
    everything but the role's credentials), for as long as this process runs; upstream
    the metadata itself (this user is past the fence), the sandbox's where it runs."""
    address = values.get("proxy_address")
    if not address:  # settings of an older clusterkit: no fence was put up
        return
    upstream = os.environ.get(METADATA_ENDPOINT_ENV) or imdsproxy.DEFAULT_UPSTREAM
    imdsproxy.serve(address, imdsfence.PROXY_PORT, upstream)
    rt.info(f"serving the instance metadata to the master's other users on {address}:"
            f"{imdsfence.PROXY_PORT}, the role's credentials refused", stage=Stage.TRAIN)


def _terminated(signum: int, _frame: object) -> None:
    """TERM (`down`, ``retire.stop``): unwound like an error, so the controller retires."""
    signal.signal(signum, signal.SIG_IGN)  # once: its retirement is not cut short
    raise SystemExit(128 + signum)


def run(directory: str, report: Reporter) -> JobOutcome:
    """Follow and recover the job ``DIR/controller.json`` names, until it ends; then, or
    on TERM or an error, retire (``retire.retire``: its key off the nodes, the master's
    node profile back)."""
    from clusterkit.cluster.jobs.retire import retire

    where = Path(directory)
    values: dict[str, Any] = json.loads((where / controller.SETTINGS).read_text())
    if values.get("ssh_cidr"):  # the stack's rule as it is: not this master's address
        os.environ[OVERRIDE_ENV] = values["ssh_cidr"]
    signal.signal(signal.SIGTERM, _terminated)
    with holding(where / controller.LOCK):
        rt = Runtime.make(region=values["region"], report=report)
        try:
            return _follow(rt, values, where)
        finally:
            retire(rt, values, where)


def _follow(rt: Runtime, values: dict[str, Any], where: Path) -> JobOutcome:
    """Follow and recover the job, as `train --attach` does, until it ends."""
    from clusterkit.cluster.jobs.attach import do_attach

    serve_metadata(rt, values)
    method = credentials_source(rt)
    rt.info(f"controller of job {values['job_id']} on cluster {values['cluster']} "
            f"(pid {os.getpid()}; AWS credentials: {method}"
            f"{', sandbox' if os.environ.get(SANDBOX_ENV) == '1' else ''})",
            stage=Stage.TRAIN)
    (where / controller.READY).write_text(
        json.dumps({"pid": os.getpid(), "job_id": values["job_id"]}) + "\n")
    try:
        with open(os.devnull, "w") as dropped:
            outcome = do_attach(str(where / controller.SPEC_COPY),
                                job_id=values["job_id"], out=dropped,
                                region=values["region"],
                                max_recoveries=int(values["max_recoveries"]), rt=rt,
                                node_workdir=values.get("node_workdir") or None)
    finally:
        (where / controller.READY).unlink(missing_ok=True)
    rt.info(f"job {outcome.job_id} {outcome.state}"
            f"{': ' + outcome.reason if outcome.reason else ''}; "
            f"{len(outcome.recoveries)} recovery(ies)", stage=Stage.TRAIN)
    return outcome
