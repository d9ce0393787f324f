"""`clusterkit up --timeline FILE.png` and `clusterkit status NAME --timeline FILE.png`
through the CLI against moto in server mode: the last `up`'s record drawn as a PNG;
a missing record is exit 1, an unwritable place exit 2 before anything runs."""

from __future__ import annotations

from click.testing import CliRunner

from clusterkit.cli.main import cli
from clusterkit.cluster.provision.down import do_down
from tests import support
from tests.integration.conftest import runtime, write_spec

PNG = b"\x89PNG\r\n\x1a\n"


def test_up_draws_its_timeline_and_status_draws_the_last_one(moto_env, tmp_path,
                                                              monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # the CLI straight at the emulator
    name = support.unique_name("tl")
    spec = str(write_spec(tmp_path, name=name, count=2))
    first = tmp_path / "up.png"
    result = CliRunner().invoke(cli, ["up", spec, "--yes", "--no-wait-ssh",
                                      "--timeline", str(first)])
    assert result.exit_code == 0, result.output
    assert first.read_bytes().startswith(PNG)
    assert f"timeline of the last `up` of {name}: {first}" in result.output
    again = tmp_path / "status.png"
    shown = CliRunner().invoke(cli, ["status", name, "--timeline", str(again)])
    assert shown.exit_code == 0, shown.output
    assert again.read_bytes() == first.read_bytes()  # the same record, drawn the same
    do_down(name, yes=True, rt=runtime())


def test_timeline_errors(moto_env, tmp_path, monkeypatch):
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")
    spec = str(write_spec(tmp_path, count=1))
    nowhere = str(tmp_path / "no-such-dir" / "x.png")
    for argv in (["up", spec, "--yes", "--timeline", nowhere],
                 ["status", "never-up", "--timeline", nowhere],
                 ["status", "--timeline", str(tmp_path / "x.png")]):
        result = CliRunner().invoke(cli, argv)
        assert result.exit_code == 2, (argv, result.output)
    missing = CliRunner().invoke(cli, ["status", "never-up", "--timeline",
                                       str(tmp_path / "x.png")])
    assert missing.exit_code == 1 and "no record of an `up` of cluster never-up" in \
        missing.stderr
    assert not (tmp_path / "x.png").exists()
