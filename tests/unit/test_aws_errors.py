"""aws.errors: the one table that turns botocore errors into clusterkit errors, and the
``aws_call`` wrapper every aws/ verb calls through. botocore's own exception classes,
built as botocore builds them from an AWS error response; no AWS call is made here (the
tests/integration/test_aws_*.py files check the same translation against the emulator)."""

from __future__ import annotations

import pytest
from botocore.exceptions import (
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ProfileNotFound,
    ReadTimeoutError,
)

from clusterkit.aws.errors import (
    CAPACITY_CODES,
    CREDENTIAL_CODES,
    QUOTA_CODES,
    THROTTLE_CODES,
    aws_call,
    translate,
)
from clusterkit.errors import AwsError, CapacityError, CredentialsError, QuotaError, SandboxError


def client_error(code: str, message: str = "it went wrong", op: str = "RunInstances"
                 ) -> ClientError:
    return ClientError({"Error": {"Code": code, "Message": message}}, op)


@pytest.mark.parametrize(("codes", "kind", "hint_has"), [
    (CAPACITY_CODES, CapacityError, "next offer"),
    (QUOTA_CODES, QuotaError, "Service Quotas"),
    (CREDENTIAL_CODES, CredentialsError, "IAM permissions"),
    (THROTTLE_CODES, AwsError, "throttling"),
])
def test_every_code_of_a_rule_gives_its_error_and_hint(codes, kind, hint_has):
    for code in sorted(codes):
        err = translate(client_error(code, "nope"), "RunInstances", "2 x c5.large")
        assert type(err) is kind, code
        assert err.message == f"RunInstances on 2 x c5.large failed: {code}: nope"
        assert hint_has in (err.hint or "")
        assert (err.code, err.resource, err.exit_code) == (code, "2 x c5.large", 1)


def test_an_unknown_code_is_a_plain_aws_error_pointing_at_debug():
    err = translate(client_error("InvalidParameterValue", "bad value"), "CreateTags")
    assert type(err) is AwsError
    assert err.message == "CreateTags failed: InvalidParameterValue: bad value"
    assert err.hint == "run with --debug for the full AWS response"
    assert err.resource is None


def test_no_credentials():
    err = translate(NoCredentialsError(), "DescribeRegions")
    assert type(err) is CredentialsError
    assert (err.message, err.code) == ("no AWS credentials found", "NoCredentials")
    assert "aws configure" in (err.hint or "")


def test_unknown_profile_keeps_botocores_words():
    exc = ProfileNotFound(profile="nosuch")
    err = translate(exc, "open the session")
    assert type(err) is CredentialsError
    assert err.message == str(exc)
    assert "--profile" in (err.hint or "")


def test_unreachable_endpoint():
    exc = EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    err = translate(exc, "DescribeVpcs", "us-east-1")
    assert type(err) is AwsError
    assert err.message == f"DescribeVpcs on us-east-1: cannot reach the AWS endpoint ({exc})"
    assert "AWS_ENDPOINT_URL" in (err.hint or "")
    assert err.code is None


def test_unreachable_endpoint_in_sandbox_mode_is_the_sandbox_stopped(monkeypatch):
    """Issue 36 item 6: the sandbox's endpoint refusing the connection means it stopped:
    what every command says when it finds no sandbox (exit 1, start it)."""
    exc = EndpointConnectionError(endpoint_url="http://127.0.0.1:9")
    monkeypatch.setenv("CLUSTERKIT_SANDBOX", "1")
    for err in (translate(exc, "DescribeVpcs", "us-east-1"),
                translate(exc, "DescribeVpcs", "us-east-1", sandbox=True)):
        assert type(err) is SandboxError and err.exit_code == 1
        assert err.message.startswith("the sandbox is not running (DescribeVpcs on us-east-1")
        assert err.hint == "start it with `clusterkit sandbox start`"
    monkeypatch.delenv("CLUSTERKIT_SANDBOX")
    assert type(translate(exc, "DescribeVpcs", "us-east-1")) is AwsError
    assert type(translate(exc, "DescribeVpcs", sandbox=True)) is SandboxError


def test_other_botocore_errors_carry_their_text():
    exc = ReadTimeoutError(endpoint_url="http://127.0.0.1:9")
    err = translate(exc, "DescribeInstances", "c1")
    assert err.message == f"DescribeInstances on c1 failed: {exc}"
    assert err.code is None


def test_aws_call_raises_the_translation_with_the_cause():
    with pytest.raises(QuotaError) as caught, aws_call("RunInstances", "4 x p4d"):
        raise client_error("VcpuLimitExceeded")
    assert caught.value.message == "RunInstances on 4 x p4d failed: VcpuLimitExceeded: " \
        "it went wrong"
    assert isinstance(caught.value.__cause__, ClientError)


def test_aws_call_ends_quietly_on_an_expected_code_and_says_which():
    with aws_call("DeleteVolume", "vol-1", expected={"InvalidVolume.NotFound"}) as call:
        raise client_error("InvalidVolume.NotFound")
    assert call.expected_error == "InvalidVolume.NotFound"
    with aws_call("DeleteVolume", "vol-1", expected={"InvalidVolume.NotFound"}) as call:
        pass
    assert call.expected_error is None


def test_aws_call_expected_code_narrowed_by_message():
    expect = {"expected": ("ValidationError",), "message": "does not exist"}
    with aws_call("DescribeStacks", "s", **expect) as call:
        raise client_error("ValidationError", "Stack with id s does not exist")
    assert call.expected_error == "ValidationError"
    with pytest.raises(AwsError, match="Template format error"), \
            aws_call("DescribeStacks", "s", **expect):
        raise client_error("ValidationError", "Template format error")


def test_aws_call_lets_other_exceptions_through():
    with pytest.raises(KeyError), aws_call("DescribeVpcs", expected={"KeyError"}):
        raise KeyError("Vpcs")
