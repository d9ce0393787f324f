"""`clusterkit autostop NAME DURATION|off`'s DURATION as the user types it (issue 36): a
negative one is a DURATION refused as such (exit 2, the accepted forms), not click's
`No such option '-5'`; checked before any AWS call."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from clusterkit.cli.main import cli


@pytest.mark.parametrize("duration", ["-5m", "-5", "5x", "0s"])
def test_a_bad_duration_is_said_to_be_one(duration: str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX", raising=False)
    result = CliRunner().invoke(cli, ["autostop", "demo", duration])
    assert result.exit_code == 2, result.output
    assert "No such option" not in result.output
    assert "20s, 30m, 2h or 1h30m" in result.output or "at least 10s" in result.output
    assert "hint: e.g. `clusterkit autostop NAME 30m`, or `off`" in result.output
