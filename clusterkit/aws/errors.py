"""Turn botocore exceptions into clusterkit errors with a hint."""

from __future__ import annotations

from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    EndpointConnectionError,
    NoCredentialsError,
)
from botocore.parsers import ResponseParserError

from clusterkit.errors import AwsError, CapacityError, CredentialsError, QuotaError

# What a botocore call can raise besides ClientError: no credentials, endpoint unreachable,
# timeouts, unparsable responses. Every aws/ verb catches all of them and translates, so
# the CLI never shows a traceback for them.
AWS_EXCEPTIONS = (ClientError, BotoCoreError, ResponseParserError)

# Launch errors where another offer (AZ, type, region, market) may succeed.
CAPACITY_CODES = frozenset({
    "InsufficientInstanceCapacity", "InsufficientCapacity", "SpotMaxPriceTooLow",
    "MaxSpotInstanceCountExceeded", "Unsupported", "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity", "UnfulfillableCapacity",
    "InvalidFleetConfiguration",
})
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


def error_code(exc: BaseException) -> str:
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code", ""))
    return ""


def translate(exc: BaseException, operation: str, resource: str | None = None) -> AwsError:
    """Map a botocore exception to the clusterkit error the caller should raise."""
    code = error_code(exc)
    what = f"{operation}" + (f" on {resource}" if resource else "")
    if isinstance(exc, NoCredentialsError):
        return CredentialsError("no AWS credentials found",
                                "run `aws configure`, set AWS_PROFILE, or use --sandbox",
                                code="NoCredentials", resource=resource)
    if isinstance(exc, EndpointConnectionError):
        return AwsError(f"{what}: cannot reach the AWS endpoint ({exc})",
                        "check the network, --region, and AWS_ENDPOINT_URL", resource=resource)
    message = exc.response["Error"].get("Message", str(exc)) if isinstance(exc, ClientError) \
        else str(exc)
    text = f"{what} failed: {code}: {message}" if code else f"{what} failed: {message}"
    if code in CAPACITY_CODES:
        return CapacityError(text, "clusterkit tries the next offer", code=code,
                             resource=resource)
    if code in QUOTA_CODES:
        return QuotaError(text, "request a quota increase in the Service Quotas console "
                          "(EC2 > Running On-Demand/Spot instances, vCPU based), or ask for "
                          "fewer or smaller nodes", code=code, resource=resource)
    if code in CREDENTIAL_CODES:
        return CredentialsError(text, "check the credentials and the IAM permissions of "
                                "the profile in use", code=code, resource=resource)
    if code in THROTTLE_CODES:
        return AwsError(text, "AWS is throttling this account; retry in a minute",
                        code=code, resource=resource)
    return AwsError(text, "run with --debug for the full AWS response", code=code,
                    resource=resource)
