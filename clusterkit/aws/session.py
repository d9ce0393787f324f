"""boto3 sessions and clients. The only place clients are made, so every one gets
the same retry policy (adaptive backoff for throttling) and the sandbox net guard."""

from __future__ import annotations

import copy
import os
from functools import cache
from typing import TYPE_CHECKING, Any

from botocore.exceptions import EndpointConnectionError

from clusterkit import __version__
from clusterkit.aws.errors import aws_call
from clusterkit.errors import UsageError
from clusterkit.netguard import check_url

if TYPE_CHECKING:
    import boto3
    from botocore.config import Config


# boto3 and botocore.config are imported once a session or a client is made: a command
# that needs no AWS call (`train` on the nodes `up` kept, `top`, `logs`) never pays the
# ~0.15 s their import takes.
@cache
def retry_config() -> Config:
    from botocore.config import Config

    return Config(retries={"mode": "adaptive", "max_attempts": 10},
                  user_agent_extra=f"clusterkit/{__version__}", connect_timeout=10,
                  read_timeout=60)


def __getattr__(name: str) -> Any:  # RETRY_CONFIG, as it was before it became lazy
    if name == "RETRY_CONFIG":
        return retry_config()
    raise AttributeError(name)


# An endpoint that refuses the connection or has no address answers at once: two tries
# (a restarting endpoint), not the throttling policy's ten with backoff (~25 s).
UNREACHABLE_ATTEMPTS = 2


def make_session(region: str | None = None, profile: str | None = None) -> boto3.Session:
    """A session in ``region``, else AWS_REGION, else what boto3 finds (AWS_DEFAULT_REGION,
    the profile's region): the AWS CLI's order, where boto3 alone ignores AWS_REGION."""
    region = region or os.environ.get("AWS_REGION") or None
    import boto3

    with aws_call("open the session", profile):  # ProfileNotFound -> CredentialsError
        return boto3.Session(region_name=region, profile_name=profile)


def _fresh(config: Config) -> Config:
    """A deep copy: botocore rewrites the ``retries`` dict of the Config it is given in
    place (max_attempts -> total_max_attempts), which would change RETRY_CONFIG itself."""
    return copy.deepcopy(config)


def _guard_request(request: Any, **_: Any) -> None:
    check_url(request.url, purpose="AWS API")


def _unreachable_fails_fast(caught_exception: BaseException | None = None,
                            attempts: int = 0, **_: Any) -> None:
    """Runs before botocore's retry handler: raising ends the retries with the error."""
    if isinstance(caught_exception, EndpointConnectionError) \
            and attempts >= UNREACHABLE_ATTEMPTS:
        raise caught_exception


def client(session: boto3.Session, service: str, region: str | None = None, *,
           config: Config | None = None) -> Any:
    """A botocore client with clusterkit's retry policy and the net guard attached.

    ``config`` is merged over the retry policy (e.g. fewer retries for an optional
    lookup that has a fallback). ``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_<SERVICE>``
    are honoured by botocore."""
    try:
        with aws_call(f"make an AWS {service} client"):  # e.g. NoCredentialsError
            made = session.client(service, region_name=region or session.region_name,
                                  config=_fresh(retry_config().merge(config) if config
                                                else retry_config()))
    except ValueError as exc:  # botocore's answer to a malformed endpoint URL
        raise UsageError(f"cannot make an AWS {service} client: {exc}",
                         "check AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_<SERVICE>") from exc
    made.meta.events.register("before-send", _guard_request)
    made.meta.events.register_first("needs-retry", _unreachable_fails_fast)
    return made
