"""plan/network.py: the EFA interfaces a launch asks for and what the plan says of them,
from the catalog's NetworkInfo (p4d 4, p5.48xlarge 32) and ``network.efa``."""

from __future__ import annotations

import pytest

from clusterkit.catalog.instances import InterfaceKind
from clusterkit.plan.network import efa_interfaces, efa_lines
from clusterkit.spec import loads


def _spec(itype: str, efa: str = "auto", placement: bool = True) -> object:
    return loads(f"name: t\nregion: us-east-1\nnodes: {{count: 2, instance_types: [{itype}],"
                 f" placement_group: {str(placement).lower()}}}\nnetwork: {{efa: {efa}}}\n")


@pytest.mark.parametrize("itype, count, efa_only", [
    ("p4d.24xlarge", 4, 0), ("p5.48xlarge", 32, 31), ("p5en.48xlarge", 16, 0),
    ("g5.48xlarge", 1, 0), ("c5.large", 0, 0)])
def test_every_efa_interface_of_the_type_one_per_card(itype: str, count: int,
                                                     efa_only: int) -> None:
    found = efa_interfaces(_spec(itype), itype)
    assert len(found) == count
    assert sorted(i.card for i in found) == list(range(count))
    assert sum(i.kind is InterfaceKind.EFA_ONLY for i in found) == efa_only
    assert all((i.device == 0) == (i.card == 0) for i in found)


def test_network_efa_false_launches_none_and_the_plan_says_so() -> None:
    spec = _spec("p4d.24xlarge", "false")
    assert efa_interfaces(spec, "p4d.24xlarge") == ()
    assert efa_lines(spec, "p4d.24xlarge", [0, 1]) == [
        "  network: no EFA (network.efa: false; p4d.24xlarge has 4)"]


def test_the_plan_says_the_count_the_bandwidth_and_the_masters_elastic_ip() -> None:
    assert efa_lines(_spec("p4d.24xlarge"), "p4d.24xlarge", [0, 1, 2, 3]) == [
        "  network: 4 EFA interface(s) per node on 4 network card(s), 400 Gbps per node, "
        "in the cluster placement group",
        "  the master gets an Elastic IP (EC2 gives no public IP to an instance with "
        "several network interfaces; released by down)"]
    p5 = efa_lines(_spec("p5.48xlarge", placement=False), "p5.48xlarge", [2, 3])
    assert p5 == ["  network: 32 EFA interface(s) per node on 32 network card(s), 31 of "
                  "them efa-only, 3200 Gbps per node"]  # no master launched: no address
    assert efa_lines(_spec("g5.48xlarge"), "g5.48xlarge", [0])[1:] == []  # one interface
    assert efa_lines(_spec("c5.large"), "c5.large", [0]) == []


def test_the_plan_of_the_p4d_example_shows_4_efa_per_node_and_a_p5_spec_plans_32(
        tmp_path) -> None:
    """Issue 28's "done when", as `clusterkit plan --offline` prints it."""
    from pathlib import Path

    from click.testing import CliRunner

    from clusterkit.cli.main import cli

    example = Path(__file__).parents[2] / "examples" / "imagenet-p4d-spot.yaml"
    p4d = CliRunner().invoke(cli, ["plan", "--offline", str(example)])
    assert p4d.exit_code == 0, p4d.output
    # (words compared: the renderer may wrap a line at the terminal's width)
    assert "network: 4 EFA interface(s) per node on 4 network card(s), 400 Gbps" in \
        " ".join(p4d.output.split())
    p5 = tmp_path / "p5.yaml"
    p5.write_text(example.read_text().replace("[p4d.24xlarge]", "[p5.48xlarge]"))
    shown = CliRunner().invoke(cli, ["plan", "--offline", str(p5)])
    assert shown.exit_code == 0, shown.output
    assert "network: 32 EFA interface(s) per node on 32 network card(s), 31 of them " \
           "efa-only, 3200 Gbps" in " ".join(shown.output.split())
