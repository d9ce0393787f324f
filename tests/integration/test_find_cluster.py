"""Finding a cluster wherever it lives (local record, else a parallel tag search of every
enabled region; --region narrows), `down` across regions without touching another
region's stack, and the `down` confirmation. Against moto in server mode (real HTTP);
moto's DescribeRegions stands in for the account's enabled regions. SSH waiting is off
(moto's nodes have no sshd)."""

from __future__ import annotations

import boto3
import pytest
from click.testing import CliRunner

from clusterkit import statedir
from clusterkit.cli import provision
from clusterkit.cli.main import cli
from clusterkit.cluster.access import record
from clusterkit.cluster.ops.status import do_status
from clusterkit.cluster.provision.down import do_down
from clusterkit.cluster.provision.up import do_up
from clusterkit.errors import ClusterkitError
from tests.integration.conftest import Calls, leftovers, runtime, write_spec

EAST2 = "us-east-2"


def _in_region(path, region: str):
    path.write_text(path.read_text().replace("region: us-east-1", f"region: {region}"))
    return path


def _roles(cluster: str) -> dict[str, str]:
    """IAM role name -> its clusterkit:region tag."""
    iam = boto3.client("iam")
    out = {}
    for role in iam.list_roles(PathPrefix=f"/clusterkit/{cluster}/")["Roles"]:
        tags = iam.list_role_tags(RoleName=role["RoleName"])["Tags"]
        out[role["RoleName"]] = {t["Key"]: t["Value"] for t in tags}.get("clusterkit:region")
    return out


def test_down_by_name_finds_the_cluster_in_another_region(calls: Calls, tmp_path, capsys):
    """The reported case: cluster in us-east-2, default region us-east-1, `down NAME`."""
    spec = _in_region(write_spec(tmp_path, name="fx-east2", count=2), EAST2)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    rec = record.read("fx-east2")
    assert rec is not None and rec.region == EAST2 and rec.stack == "clusterkit-fx-east2"
    assert set(_roles("fx-east2").values()) == {EAST2}
    calls.reset()
    result = do_down("fx-east2", yes=True, rt=runtime(calls))  # session region: us-east-1
    assert list(result.deleted) == [EAST2]
    assert "DescribeRegions" not in calls.by_operation()  # the record said where
    assert leftovers("fx-east2", EAST2) == {} and leftovers("fx-east2") == {}
    assert "is gone" in capsys.readouterr().err
    assert not statedir.cluster_dir("fx-east2").exists()


def test_without_a_record_every_region_is_searched(calls: Calls, tmp_path, capsys):
    spec = _in_region(write_spec(tmp_path, name="fx-lost", count=1), EAST2)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    statedir.remove_cluster_dir("fx-lost")  # a lost laptop
    result = do_status("fx-lost", rt=runtime(calls))
    assert [n.region for n in result.nodes] == [EAST2]
    assert calls.by_operation()["DescribeRegions"] == 1
    searched = {r for r in result.regions}
    assert {"us-east-1", EAST2, "eu-west-1"} <= searched
    # --region narrows the search: not there
    assert do_status("fx-lost", region="us-east-1", rt=runtime()).nodes == []
    down = do_down("fx-lost", yes=True, rt=runtime())
    assert list(down.deleted) == [EAST2]
    assert leftovers("fx-lost", EAST2) == {}
    assert "is gone" in capsys.readouterr().err


def test_down_in_one_region_keeps_the_other_regions_stack_and_role(moto_env, tmp_path, capsys):
    """The same cluster name with a stack in two regions: `down --region us-east-1` deletes
    only that region's resources, IAM roles and instance profiles included (each region's
    pair is named for it); the us-east-2 stack, its roles, profiles and nodes stay, and
    the local record is kept (it names a region not searched)."""
    efs = "storage:\n  efs: {mount: /efs, deletion_policy: delete}\n"
    east2 = _in_region(write_spec(tmp_path, name="fx-two", count=1, extra=efs), EAST2)
    do_up(str(east2), yes=True, rt=runtime(), wait_ssh=False)
    do_up(str(write_spec(tmp_path, name="fx-two", count=1, extra=efs)), yes=True,
          rt=runtime(), wait_ssh=False)
    # the nodes' role and the recovery controller's, in each region
    assert sorted(_roles("fx-two").values()) == ["us-east-1", "us-east-1", EAST2, EAST2]
    do_down("fx-two", yes=True, region="us-east-1", rt=runtime())
    left = leftovers("fx-two", "us-east-1")  # IAM is global: us-east-2's role is listed
    assert set(left) == {"iam_roles", "instance_profiles"}
    assert list(_roles("fx-two").values()) == [EAST2, EAST2]
    assert sorted(left["instance_profiles"]) == [f"clusterkit-fx-two-{EAST2}-controller",
                                                 f"clusterkit-fx-two-{EAST2}-node"]
    left = leftovers("fx-two", EAST2)
    assert left["stacks"] and left["instances"] and left["iam_roles"]
    assert record.read("fx-two") is not None
    assert "nothing to delete" not in capsys.readouterr().err
    do_down("fx-two", yes=True, rt=runtime())
    assert leftovers("fx-two", EAST2) == {} and _roles("fx-two") == {}


def test_declining_down_exits_1_and_deletes_nothing(moto_env, tmp_path, monkeypatch):
    spec = write_spec(tmp_path, name="fx-no", count=1)
    do_up(str(spec), yes=True, rt=runtime(), wait_ssh=False)
    with pytest.raises(ClusterkitError) as err:
        do_down("fx-no", yes=False, rt=runtime(), confirm=lambda q: False)
    assert err.value.exit_code == 1 and "nothing deleted" in err.value.message
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")  # the CLI straight at the emulator
    no_terminal = CliRunner().invoke(cli, ["down", "fx-no"], input="y\n")
    assert no_terminal.exit_code == 2, no_terminal.output  # refused like `up`: no one asked
    assert "no terminal to ask on: nothing deleted" in no_terminal.output
    assert "--yes" in no_terminal.output
    monkeypatch.setattr(provision, "_terminal", lambda: True)  # a user at the terminal
    for answer in ("n\n", ""):  # "no", then end of input (what Ctrl-C at the prompt gives)
        run = CliRunner().invoke(cli, ["down", "fx-no"], input=answer)
        assert run.exit_code == 1, run.output
        assert "nothing deleted" in run.output
    assert leftovers("fx-no")["instances"]
    do_down("fx-no", yes=True, rt=runtime())
    assert leftovers("fx-no") == {}
