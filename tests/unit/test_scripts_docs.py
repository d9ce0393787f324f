"""scripts/docs.py and the docs site's generated and quoted parts: the generated pages
(every command and option, the IAM policies, the exit codes, the sandbox's timings, the
wire records) and parts (the spec key table, the examples' costs and quotas, what
install.sh installs) are what the code says today; every command and option has its
entry; and every error the troubleshooting page quotes is the one the code prints."""

from __future__ import annotations

import io
import re
from pathlib import Path
from types import SimpleNamespace

import click
import pytest
from botocore.exceptions import ClientError
from rich.console import Console

from clusterkit.aws.errors import translate
from clusterkit.cli.render import render_error
from clusterkit.errors import ClusterkitError, UsageError
from clusterkit.spec.doc import SHOWN_DEFAULTS, key_table
from clusterkit.spec.keys import walk_keys
from clusterkit.training.jobfiles import state_of
from tests import support

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SPEC_PAGE = (DOCS / "reference/spec.md").read_text()
TROUBLESHOOTING = (DOCS / "operations/troubleshooting.md").read_text()
EXAMPLES = ROOT / "examples"


@pytest.fixture(scope="module")
def docs():
    return support.load_script("docs")


def _section(text: str, name: str) -> str:
    return text.split(f"<!-- section:{name} -->")[1].split(f"<!-- /section:{name} -->")[0]


def test_generated_pages_and_parts_are_fresh(docs):
    assert docs.stale() == [], "run: scripts/docs.sh write"
    assert docs.main(["--check"]) == 0


def test_every_generated_page_says_it_is_generated(docs):
    for page in docs.PAGES:
        assert (DOCS / page).read_text().startswith(docs.NOTE), page


def test_a_hand_edited_generated_page_is_stale(docs, monkeypatch, tmp_path):
    for page in [*docs.PAGES, *(page for page, _make in docs.PARTS.values())]:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((DOCS / page).read_text())
    monkeypatch.setattr(docs, "DOCS", tmp_path)
    assert docs.stale() == []
    cli_page = tmp_path / "reference/cli.md"
    cli_page.write_text(cli_page.read_text().replace("`--yes`", "`--yes-please`", 1))
    assert docs.stale() == [cli_page]
    assert docs.main(["--check"]) == 1
    assert docs.main(["--write"]) == 0 and docs.stale() == []


def test_a_stale_part_is_rewritten(docs):
    stale = SPEC_PAGE.replace("| `train.python` |", "| `train.interpreter` |")
    assert stale != SPEC_PAGE
    assert docs.regenerate(stale, ["spec-keys"]) == SPEC_PAGE


def test_a_missing_marker_is_refused(docs):
    with pytest.raises(SystemExit, match="generated:spec-keys"):
        docs.regenerate(SPEC_PAGE.replace("<!-- generated:spec-keys -->", ""), ["spec-keys"])


def _commands(group: click.Group, ctx: click.Context):
    """(path, command) of every command under ``group``, hidden ones too."""
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        sub = click.Context(command, info_name=name, parent=ctx)
        yield sub.command_path, command
        if isinstance(command, click.Group):
            yield from _commands(command, sub)


def test_every_command_and_option_has_its_entry():
    from clusterkit.cli.main import cli

    page = (DOCS / "reference/cli.md").read_text()
    entries = re.split(r"\n(?=#+ `clusterkit)", page)
    found = list(_commands(cli, click.Context(cli, info_name="clusterkit")))
    assert {"clusterkit up", "clusterkit sandbox start", "clusterkit train"} <= \
        {path for path, _c in found}
    for path, command in found:
        (entry,) = [e for e in entries if e.lstrip("#").startswith(f" `{path}`\n")]
        for param in command.params:
            if isinstance(param, click.Option) and not param.hidden:
                assert f"| `{param.opts[0]}`" in entry, (path, param.opts)
            elif isinstance(param, click.Argument):
                assert f"`{param.human_readable_name}`" in entry, (path, param.name)


def test_key_table_has_every_key_once_with_new_keys():
    table = key_table()
    paths = [p for p, _ in walk_keys() if p and not p.endswith(("[]", ".*"))]
    for path in paths:
        assert table.count(f"| `{path}` |") == 1, path
    assert len(table.splitlines()) == len(paths) + 2
    assert "| `storage.dataset.size_gb` | integer | the snapshot's size |" in table
    assert "| `train.framework` | `mxnet` \\| `torchrun` | `mxnet` |" in table
    assert "| `nodes.count` | integer | `1` | Number of nodes (node 0 is the master). " \
           "(1..100000) |" in table
    assert "| `nodes.max_price` | number | on-demand price |" in table and "(>0..1000)" in table


def test_shown_defaults_name_existing_keys():
    assert set(SHOWN_DEFAULTS) <= {p for p, _ in walk_keys()}


def test_quotas_per_market_and_largest_candidate(docs):
    p4d = docs.quota_lines(EXAMPLES / "imagenet-p4d-spot.yaml")  # 4 x 96, both markets
    assert p4d == ["384 vCPUs of *All P Spot Instance Requests (L-7212CCBC)*",
                   "384 vCPUs of *Running On-Demand P instances (L-417A185B)*"]
    g5 = docs.quota_lines(EXAMPLES / "torchrun-g5.yaml")  # 2 x g5.24xlarge (96), spot
    assert g5 == ["192 vCPUs of *All G and VT Spot Instance Requests (L-3819A6DF)*"]
    with pytest.raises(SystemExit, match="x1e.xlarge"):
        docs._quota("x1e.xlarge")


def _printed(err: ClusterkitError) -> list[str]:
    out = io.StringIO()
    render_error(err, Console(file=out, width=10_000, no_color=True, highlight=False))
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and lines[0].startswith("error: ")
    return lines


def _client_error(code: str, message: str) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, "RunInstances")


def _troubles(monkeypatch: pytest.MonkeyPatch) -> list[ClusterkitError]:
    from clusterkit.cluster.jobs import attempt
    from clusterkit.cluster.provision.launch import capacity_hint
    from clusterkit.plan.dataset import check_snapshot
    from clusterkit.plan.pinning import MISSING, PinKind, Pinned, PinReport
    from clusterkit.remote import known_hosts

    launch = "4 x p4d.24xlarge spot in use1-az1"
    capacity = translate(_client_error(
        "InsufficientInstanceCapacity", "We currently do not have sufficient p4d.24xlarge "
        "capacity in the Availability Zone you requested (us-east-1a)."), "RunInstances", launch)
    capacity.hint = capacity_hint("spot")
    quota = translate(_client_error(
        "VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU "
        "limit of 0 allows for the instance bucket that the specified instance type belongs "
        "to."), "RunInstances", launch)
    snap = "snap-0123456789abcdef0"
    verdict = check_snapshot(snap, "us-east-1", None, ["us-west-2"])
    pin = Pinned(PinKind.SNAPSHOT, snap, "storage.dataset.snapshot")
    errors = [capacity, quota, UsageError(verdict.error, verdict.hint),
              PinReport(("us-east-1",), {pin: {"us-east-1": MISSING}}).failure()]
    ready = attempt.Ready({"master": [state_of({"job_id": "JOB", "state": "running"})]},
                        [1, 2, 3], "/root", "", None)
    with pytest.raises(ClusterkitError) as stale:
        master = SimpleNamespace(hop=SimpleNamespace(label="master"))
        attempt.refuse_running(None, SimpleNamespace(name="NAME", master=master), ready,
                             replace=False)
    errors.append(stale.value)
    return errors + [known_hosts.changed_error([known_hosts.KeyChange(
        "worker-2", "i-0abc", "ssh-ed25519 AAAA", "ssh-ed25519 BBBB")])]


def test_troubleshooting_quotes_what_the_code_prints(monkeypatch):
    section = _section(TROUBLESHOOTING, "troubleshooting")
    errors = _troubles(monkeypatch)
    assert len(errors) == 6
    for err in errors[:-1]:
        for line in _printed(err):
            assert line in section, line
    # fingerprints differ per key: the changed-host-key quote elides them
    changed = _printed(errors[-1])
    assert changed[0].split(": worker-2")[0] in section
    assert changed[1] in section


def test_troubleshooting_quotes_the_no_key_error(monkeypatch, tmp_path):
    from clusterkit.remote import probe

    class NoAgent:
        def get_keys(self):
            return ()

    monkeypatch.setattr(probe.paramiko, "Agent", NoAgent)
    monkeypatch.setattr(probe, "DEFAULT_KEYS", (str(tmp_path / "none.pub"),))
    with pytest.raises(UsageError) as caught:
        probe.local_public_key()
    section = _section(TROUBLESHOOTING, "troubleshooting")
    for line in _printed(caught.value):
        assert line in section, line
