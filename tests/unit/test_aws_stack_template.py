"""The CloudFormation template ships inside the package (clusterkit/resources is a link to
templates/), so a non-editable install reads the same file the repo holds."""

from pathlib import Path

from clusterkit.aws.stack import template_body

REPO_TEMPLATE = Path(__file__).resolve().parents[2] / "templates" / "cluster.yaml"


def test_packaged_template_is_the_repo_template():
    assert template_body() == REPO_TEMPLATE.read_text(encoding="utf-8")
    assert "AWSTemplateFormatVersion" in template_body()
