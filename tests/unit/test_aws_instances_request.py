"""aws/instances.py's RunInstances parameters for an EFA launch, checked against
botocore's own request model (the shapes EC2's API takes), and the network part of a
plain launch. No request is sent: the emulator's half is
tests/integration/test_aws_instances.py."""

from __future__ import annotations

import botocore.session
from botocore.validate import ParamValidator

from clusterkit.aws.instances import _network, network_interfaces
from clusterkit.catalog.instances import efa_layout, lookup
from clusterkit.kinds import Market
from clusterkit.plan.launch import LaunchRequest
from tests import support


def _request(itype: str, slots: tuple[int, ...] = (0, 1)) -> LaunchRequest:
    return LaunchRequest(support.offer(itype, Market.SPOT, 1.0, az="us-east-1a"), slots,
                         None, "ck-token", {}, {}, efa=efa_layout(lookup(itype)))


def _model_errors(params: dict) -> str:
    model = botocore.session.get_session().get_service_model("ec2")
    shape = model.operation_model("RunInstances").input_shape
    report = ParamValidator().validate(params, shape)
    return report.generate_report() if report.has_errors() else ""


def test_a_p5_launch_request_fits_botocores_model_and_ec2s_efa_rules() -> None:
    request = _request("p5.48xlarge")
    nics = network_interfaces(request, "subnet-1", "sg-1")
    params = {"MinCount": 2, "MaxCount": 2, "InstanceType": "p5.48xlarge",
              "LaunchTemplate": {"LaunchTemplateId": "lt-1", "Version": "$Latest"},
              **_network(request, "subnet-1", "sg-1")}
    assert _model_errors(params) == ""
    assert "SubnetId" not in params and "SecurityGroupIds" not in params
    assert len(nics) == 32 and len({(n["NetworkCardIndex"], n["DeviceIndex"]) for n in nics}) == 32
    assert nics[0] == {"NetworkCardIndex": 0, "DeviceIndex": 0, "InterfaceType": "efa",
                       "SubnetId": "subnet-1", "Groups": ["sg-1"], "DeleteOnTermination": True}
    assert {n["InterfaceType"] for n in nics[1:]} == {"efa-only"}
    assert not any("AssociatePublicIpAddress" in n for n in nics)  # EC2 refuses it: EIP


def test_one_efa_interface_keeps_the_public_ip_and_a_plain_launch_names_subnet_and_group(
        ) -> None:
    [nic] = network_interfaces(_request("g5.48xlarge"), "subnet-1", "sg-1")
    assert nic["AssociatePublicIpAddress"] is True and nic["InterfaceType"] == "efa"
    assert not _request("g5.48xlarge").public_address
    assert _request("p4d.24xlarge").public_address
    assert not _request("p4d.24xlarge", slots=(1, 2)).public_address  # workers: no address
    plain = _network(_request("c5.large"), "subnet-1", "sg-1")
    assert plain == {"SubnetId": "subnet-1", "SecurityGroupIds": ["sg-1"]}
    assert _model_errors({"MinCount": 1, "MaxCount": 1, **plain}) == ""


def test_a_launch_asks_for_imdsv2_as_the_template_does(monkeypatch) -> None:
    """RunInstances names IMDSv2 required (and the template's hop limit): the recovery
    controller's role launches only with ec2:MetadataHttpTokens required (issue 39),
    which then does not hang on how EC2 fills the key from a launch template. (The
    client stands in for EC2 here: only the request is checked.)"""
    from clusterkit.aws import instances

    sent: list[dict] = []

    class Client:
        def run_instances(self, **kwargs: object) -> dict:
            sent.append(kwargs)
            return {"Instances": []}

    monkeypatch.setattr(instances, "_ec2", lambda *_a: Client())
    for hops in (1, 2):
        instances.run_instances(None, "us-east-1", _request("c5.large", (1,)),  # type: ignore[arg-type]
                                launch_template_id="lt-1", subnet_id="subnet-1",
                                metadata_hops=hops)
        assert sent[-1]["MetadataOptions"] == {"HttpTokens": "required", "HttpEndpoint":
                                               "enabled", "HttpPutResponseHopLimit": hops}
        assert _model_errors(sent[-1]) == ""
