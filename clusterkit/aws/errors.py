"""Turn botocore exceptions into clusterkit errors with a hint: one table (``RULES``) and
one wrapper (``aws_call``) that every aws/ verb calls through."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from types import TracebackType

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
    ProfileNotFound,
)

from clusterkit.errors import (
    AwsError,
    CapacityError,
    ClusterkitError,
    CredentialsError,
    QuotaError,
    SandboxError,
)
from clusterkit.netguard import sandbox_mode


# What a botocore call can raise besides ClientError: no credentials, endpoint unreachable,
# timeouts, unparsable responses. aws_call translates all of them, so the CLI never shows
# a traceback for them.
def aws_exceptions() -> tuple[type[BaseException], ...]:
    """The types above; botocore.parsers is imported only once one is to be caught (it
    costs ~0.1 s, which every command paid at start)."""
    from botocore.parsers import ResponseParserError

    return (ClientError, BotoCoreError, ResponseParserError)

# Launch errors where another offer (AZ, type, region, market) may succeed.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "SpotMaxPriceTooLow",
    "MaxSpotInstanceCountExceeded", "Unsupported", "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity", "UnfulfillableCapacity",
    "InvalidFleetConfiguration",
})
# A launch into a capacity reservation that has no room (or no match) for it: EC2's code.
RESERVATION_CODES = frozenset({"ReservationCapacityExceeded"})
# Account limits: no other offer helps, stop at once.
QUOTA_CODES = frozenset({
    "InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotFleetRequestCountExceeded",
    "VolumeLimitExceeded", "ResourceLimitExceeded", "LimitExceededException",
    "AddressLimitExceeded",
})
CREDENTIAL_CODES = frozenset({
    "AuthFailure", "UnauthorizedOperation", "InvalidClientTokenId", "ExpiredToken",
    "SignatureDoesNotMatch", "AccessDenied", "AccessDeniedException",
    "UnrecognizedClientException", "OptInRequired",
})
THROTTLE_CODES = frozenset({
    "RequestLimitExceeded", "Throttling", "ThrottlingException", "TooManyRequestsException",
})


@dataclass(frozen=True)
class Rule:
    """One kind of failure: the botocore exception types or AWS error codes it matches,
    the clusterkit error raised for it, the hint, and the message. The message template
    may use {what} (operation and resource), {error} (the exception's text) and {failed}
    ("<what> failed: <code>: <AWS message>")."""

    match: frozenset[str] | tuple[type[Exception], ...]
    error: type[AwsError]
    hint: str
    message: str = "{failed}"
    code: str | None = None  # carried instead of the AWS error code when set

    def matches(self, exc: BaseException, code: str) -> bool:
        if isinstance(self.match, frozenset):
            return code in self.match
        return isinstance(exc, self.match)


RULES: tuple[Rule, ...] = (
    Rule((NoCredentialsError,), CredentialsError,
         "run `aws configure`, set AWS_PROFILE, or use --sandbox",
         "no AWS credentials found", code="NoCredentials"),
    Rule((ProfileNotFound,), CredentialsError,
         "check --profile / AWS_PROFILE against ~/.aws/config", "{error}"),
    Rule((EndpointConnectionError,), AwsError,
         "check the network, --region, and AWS_ENDPOINT_URL",
         "{what}: cannot reach the AWS endpoint ({error})"),
    Rule(CAPACITY_CODES, CapacityError, "clusterkit tries the next offer"),
    Rule(RESERVATION_CODES, CapacityError, "the capacity reservation has fewer matching "
         "instances free than this launch (type, platform, AZ, tenancy), or is not active: "
         "`clusterkit plan SPEC` shows what it holds now"),
    Rule(QUOTA_CODES, QuotaError,
         "request a quota increase in the Service Quotas console (EC2 > Running "
         "On-Demand/Spot instances, vCPU based), or ask for fewer or smaller nodes"),
    Rule(CREDENTIAL_CODES, CredentialsError,
         "check the credentials and the IAM permissions of the profile in use"),
    Rule(THROTTLE_CODES, AwsError, "AWS is throttling this account; retry in a minute"),
)
OTHER = Rule(frozenset(), AwsError, "run with --debug for the full AWS response")


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def translate(exc: BaseException, operation: str, resource: str | None = None, *,
              sandbox: bool | None = None) -> ClusterkitError:
    """Map a botocore exception to the clusterkit error the caller should raise. An
    endpoint that refuses the connection in sandbox mode (``sandbox``; None: as
    CLUSTERKIT_SANDBOX says) is the sandbox stopped: SandboxError, as every command that
    finds it not running says."""
    code = error_code(exc)
    what = f"{operation}" + (f" on {resource}" if resource else "")
    if isinstance(exc, EndpointConnectionError) and (
            sandbox_mode() if sandbox is None else sandbox):
        return SandboxError.not_running(f"{what}: its AWS endpoint does not answer: {exc}")
    rule = next((r for r in RULES if r.matches(exc, code)), OTHER)
    detail = exc.response["Error"].get("Message", str(exc)) if isinstance(exc, ClientError) \
        else str(exc)
    failed = f"{what} failed: {code}: {detail}" if code else f"{what} failed: {detail}"
    message = rule.message.format(what=what, error=exc, failed=failed)
    return rule.error(message, rule.hint, code=rule.code or code or None, resource=resource)


class AwsCall:
    """Run AWS calls in a ``with`` block: botocore errors leave it as the clusterkit error
    ``translate`` gives, except the ``expected`` codes (e.g. "already gone"), which end
    the block quietly and are left in ``.expected_error`` for the caller to act on.
    ``message`` narrows ``expected`` to errors whose text contains it."""

    def __init__(self, operation: str, resource: str | None = None, *,
                 expected: Collection[str] = (), message: str = "",
                 sandbox: bool | None = None) -> None:
        self.operation = operation
        self.resource = resource
        self.expected = expected
        self.message = message
        self.sandbox = sandbox  # the endpoint is the sandbox's (None: CLUSTERKIT_SANDBOX)
        self.expected_error: str | None = None  # the expected code that ended the block

    def __enter__(self) -> AwsCall:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> bool:
        if exc is None or not isinstance(exc, aws_exceptions()):
            return False
        code = error_code(exc)
        if code and code in self.expected and self.message in str(exc):
            self.expected_error = code
            return True
        raise translate(exc, self.operation, self.resource, sandbox=self.sandbox) from exc


def aws_call(operation: str, resource: str | None = None, *, expected: Collection[str] = (),
             message: str = "", sandbox: bool | None = None) -> AwsCall:
    """``with aws_call("DescribeVpcs", region): ...``: see AwsCall."""
    return AwsCall(operation, resource, expected=expected, message=message, sandbox=sandbox)
