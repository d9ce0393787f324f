"""cli/top.py's `--prometheus` wiring: what it refuses before any node is dialled (exit
2, naming the option); no AWS endpoint or node is reachable here, so a command that got
past the check would fail otherwise (exit 1). Serving is tested in
test_cluster_exporter.py, and in the sandbox by tests/e2e/test_top.py."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import load_all_commands

cli = load_all_commands()


@pytest.mark.parametrize(("args", "says"), [
    (["--prometheus", "9101", "--once"], "--prometheus serves until Ctrl-C: not with --once"),
    (["--prometheus", "9101", "--json"], "--prometheus serves until Ctrl-C: not with --json"),
    (["--prometheus", "9101x"], "--prometheus 9101x: '9101x' is no port"),
    (["--prometheus", "::1:9101"], "an IPv6 host goes in brackets"),
])
def test_prometheus_is_refused_before_any_node_is_dialled(monkeypatch, tmp_path, args, says):
    monkeypatch.setenv("CLUSTERKIT_HOME", str(tmp_path))
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing answers there
    result = CliRunner().invoke(cli, ["top", "c1", *args])
    assert result.exit_code == 2, result.output
    assert says in result.output
