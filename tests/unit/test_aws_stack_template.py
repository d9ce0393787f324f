"""The CloudFormation template ships inside the package (clusterkit/resources is a link to
templates/), so a non-editable install reads the same file the repo holds."""

from pathlib import Path

from clusterkit.aws.stack import template_body

REPO_TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "cluster.yaml"


def test_packaged_template_is_the_repo_template():
    assert template_body() == REPO_TEMPLATE.read_text(encoding="utf-8")
    assert "AWSTemplateFormatVersion" in template_body()


def _template() -> dict:
    import yaml

    class Loader(yaml.SafeLoader):  # CloudFormation's short forms kept as {tag: value}
        pass

    def tagged(loader, suffix, node):
        if isinstance(node, yaml.ScalarNode):
            return {suffix: loader.construct_scalar(node)}
        if isinstance(node, yaml.SequenceNode):
            return {suffix: loader.construct_sequence(node, deep=True)}
        return {suffix: loader.construct_mapping(node, deep=True)}
    Loader.add_multi_constructor("!", tagged)
    return yaml.load(template_body(), Loader=Loader)


def test_imds_hop_limit_is_the_parameter_one_by_default():
    doc = _template()
    options = doc["Resources"]["NodeLaunchTemplate"]["Properties"]["LaunchTemplateData"][
        "MetadataOptions"]
    assert options == {"HttpTokens": "required", "HttpEndpoint": "enabled",
                       "HttpPutResponseHopLimit": {"Ref": "MetadataHopLimit"}}
    assert doc["Parameters"]["MetadataHopLimit"]["Default"] == 1


def test_every_created_file_system_is_encrypted_and_refuses_plain_nfs():
    doc = _template()
    systems = {k: r["Properties"] for k, r in doc["Resources"].items()
               if r["Type"] == "AWS::EFS::FileSystem"}
    assert systems
    for name, props in systems.items():
        assert props["Encrypted"] is True, name
        assert props["KmsKeyId"] == {"If": ["KmsKeyGiven", {"Ref": "KmsKeyId"},
                                            {"Ref": "AWS::NoValue"}]}, name
        deny, allow = props["FileSystemPolicy"]["Statement"]
        assert (deny["Effect"], deny["Action"]) == ("Deny", "*"), name
        assert deny["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}, name
        assert allow["Effect"] == "Allow" and "elasticfilesystem:ClientRootAccess" in \
            allow["Action"], name
        assert allow["Condition"]["ArnLike"]["aws:PrincipalArn"]["Sub"].endswith(
            ":role/clusterkit/${ClusterName}/*"), name


def test_the_group_lets_all_traffic_in_and_out_between_nodes_as_efa_requires():
    """EFA needs every protocol in and out between the nodes' security group and
    itself; the launch template names no group (each launch gives it, beside EFA
    interfaces EC2 refuses a template's group)."""
    resources = _template()["Resources"]
    rules = {name: r["Properties"] for name, r in resources.items()
             if r["Type"] in ("AWS::EC2::SecurityGroupIngress", "AWS::EC2::SecurityGroupEgress")}
    group = {"GetAtt": "NodeSecurityGroup.GroupId"}
    ingress = [p for p in rules.values() if p.get("SourceSecurityGroupId") == group]
    egress = [p for p in rules.values() if p.get("DestinationSecurityGroupId") == group]
    assert [p["IpProtocol"] for p in ingress] == ["-1"]
    assert [p["IpProtocol"] for p in egress] == ["-1"]
    assert all(p["GroupId"] == group for p in ingress + egress)
    data = resources["NodeLaunchTemplate"]["Properties"]["LaunchTemplateData"]
    assert "SecurityGroupIds" not in data and "NetworkInterfaces" not in data
