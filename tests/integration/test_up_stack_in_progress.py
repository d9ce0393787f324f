"""A stack left in progress (issue 36): an `up` interrupted right after it created the
cluster's stack leaves it CREATE_IN_PROGRESS (CloudFormation goes on without it).
`status` shows the stack's state; another clusterkit holding the cluster's lock is
refused as before; an `up` that holds the lock waits for the stack, says so, and goes on.
On a timed sandbox of its own (AWS's waits x SCALE: the stack takes ~74 s), nothing
mocked but the Ctrl-C, raised from the first stack poll after CreateStack."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from clusterkit import sandboxmode
from clusterkit.cli.main import cli
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.locks import cluster_lock
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterBusyError
from clusterkit.events import Collect, Kind
from clusterkit_sandbox.control import do_start, do_stop
from clusterkit_sandbox.timings import Timings
from tests import support
from tests.integration.conftest import leftovers, runtime, write_spec

pytestmark = [pytest.mark.sandbox, pytest.mark.root]
SCALE = 0.5  # the stack takes ~74 s: status and the refused up come well within it, loaded too


@pytest.fixture(scope="module")
def timed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    support.require_root("the timed sandbox's nodes")
    where = tmp_path_factory.mktemp("busy") / "state"
    do_start(where, Timings(SCALE))
    try:
        yield where
    finally:
        do_stop(where)


@pytest.fixture
def timed_env(timed: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in (*support.FOREIGN_AWS_VARS, "SSH_AUTH_SOCK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {**sandboxmode.sandbox_env(str(timed)),
                        "AWS_DEFAULT_REGION": "us-east-1", "HOME": str(tmp_path)}.items():
        monkeypatch.setenv(name, value)
    support.user_ssh_key(tmp_path)
    return timed


class CtrlCAfterCreateStack:
    """A botocore hook: KeyboardInterrupt at the first stack poll after CreateStack."""

    def __init__(self) -> None:
        self.created = self.fired = False

    def __call__(self, model: Any, **_: Any) -> None:
        self.created |= model.name == "CreateStack"
        if self.created and not self.fired and model.name == "DescribeStackEvents":
            self.fired = True
            raise KeyboardInterrupt("Ctrl-C right after CreateStack")


def test_status_shows_a_stack_in_progress_and_up_waits_for_it(timed_env: Path, tmp_path):
    name = f"busy-{uuid.uuid4().hex[:6]}"
    spec = str(write_spec(tmp_path, name=name, count=2))
    first = runtime()
    first.session.events.register("before-call", CtrlCAfterCreateStack())
    with pytest.raises(KeyboardInterrupt):
        do_up(spec, yes=True, rt=first, wait_ssh=False, timeout=120)
    try:
        shown = CliRunner().invoke(cli, ["status", name])
        assert shown.exit_code == 0, shown.output
        said = f"stack clusterkit-{name} in us-east-1: CREATE_IN_PROGRESS: an `up` or " \
               "`down` of the cluster is changing it"  # the renderer wraps: compare words
        assert " ".join(said.split()) in " ".join(shown.output.split()), shown.output
        as_json = json.loads(CliRunner().invoke(cli, ["status", name, "--json"]).stdout)
        assert as_json["stack"]["status"] == "CREATE_IN_PROGRESS"
        assert as_json["stack"]["in_progress"] is True

        with cluster_lock(name, "up"), pytest.raises(ClusterBusyError) as busy:
            do_up(spec, yes=True, rt=runtime(), wait_ssh=False, timeout=120)
        assert "in progress on this machine" in busy.value.message  # refused, as before

        seen = Collect()
        rt = runtime()
        rt.report = seen
        result = do_up(spec, yes=True, rt=rt, wait_ssh=False, timeout=120)
        assert [n.role for n in result.nodes] == ["master", "worker"]
        waits = [e.text for e in seen.events if e.kind is Kind.STAGE_STARTED
                 and "is CREATE_IN_PROGRESS: another `up` or `down`" in e.text]
        assert len(waits) == 1 and waits[0].endswith(
            "waiting for it to end (at most 120 s, --timeout)"), seen.texts()
        assert f"stack clusterkit-{name} is CREATE_COMPLETE: planning from what is there " \
               "now" in seen.texts(Kind.STAGE_DONE)
        settled = CliRunner().invoke(cli, ["status", name])
        assert "CREATE_IN_PROGRESS" not in settled.output and f"stack clusterkit-{name}" \
            not in settled.output  # a stack simply there: no line of its own
    finally:
        do_down(spec, yes=True, rt=runtime(), timeout=300)
    assert leftovers(name) == {}
