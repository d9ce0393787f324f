"""sandbox/moto_speed.py: what moto answers does not change, only the work per request.
The same template parses to the same objects through the C loader as through moto's own
(clusterkit's stack template with its short-form tags, and a JSON template); routing
gives what moto's own function gives, and an action added later is found."""

from __future__ import annotations

import json
from pathlib import Path

import moto.backends
import moto.core.utils
from moto.cloudformation import models

from clusterkit_sandbox import moto_speed

ROOT = Path(__file__).resolve().parents[2]


def _pure_parse(template: str):
    import yaml
    from moto.cloudformation.utils import yaml_tag_constructor
    yaml.add_multi_constructor("", yaml_tag_constructor)
    try:
        return yaml.load(template, Loader=yaml.Loader)  # noqa: S506 - as moto does
    except (yaml.parser.ParserError, yaml.scanner.ScannerError):
        return json.loads(template)


def test_templates_parse_to_what_moto_parses_them_to():
    moto_speed.install()
    moto_speed.install()  # twice: nothing is wrapped twice
    template = (ROOT / "templates" / "cluster.yaml").read_text()
    assert "!Ref" in template or "!Sub" in template  # the tags the constructor handles
    parsed = models.Stack.parse_template(template)
    assert parsed == _pure_parse(template) and parsed["Resources"]
    as_json = json.dumps({"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}, "Outputs": {}})
    assert models.Stack.parse_template(as_json) == json.loads(as_json)


def test_routing_answers_as_before_and_an_action_added_later_is_found():
    """The sandbox adds actions moto lacks (ec2_gaps) after requests were served: the
    handler lookup must see them (a memoised lookup once answered 500 to them)."""
    moto_speed.install()
    listed = list(moto.backends.list_of_moto_modules())
    assert "ec2" in listed and "cloudformation" in listed and "__pycache__" not in listed
    assert list(moto.backends.list_of_moto_modules()) == listed  # every call, whole

    class Response:
        def describe_things(self):
            return "x"

    assert moto.core.utils.method_names_from_class(Response) == ["describe_things"]
    Response.describe_more = lambda self: "y"
    assert "describe_more" in moto.core.utils.method_names_from_class(Response)
