"""IAM in the timed sandbox (`sandbox start --timings aws[:SCALE]`): an instance profile
made by CreateInstanceProfile, or given its role by AddRoleToInstanceProfile, is unknown
to EC2 for IAM's propagation wait (a timer: no CPU): AssociateIamInstanceProfile on it
meanwhile is refused as AWS refuses it (InvalidParameterValue, "Invalid IAM Instance
Profile"), and the wait is recorded in the timeline.

Only what an API call made is held (``timed.serving``)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable
from typing import Any

from clusterkit_sandbox.timed import Recorder, hold, serving
from clusterkit_sandbox.timings import Timings, Wait

PATCHED = "__clusterkit_timed__"


class Propagation:
    """When EC2 knows each profile made or changed through IAM's API (by ARN)."""

    def __init__(self, timings: Timings, recorder: Recorder) -> None:
        self.timings, self.recorder = timings, recorder
        self._known_at: dict[str, float] = {}
        self._lock = threading.Lock()

    def changed(self, arn: str) -> None:
        seconds = self.timings.wait(Wait.IAM_PROFILE_PROPAGATION)
        at = time.time() + seconds
        with self._lock:
            self._known_at[arn] = at
        hold(Wait.IAM_PROFILE_PROPAGATION, arn, seconds, lambda: self._known(arn, at),
             self.recorder)

    def _known(self, arn: str, at: float) -> bool:
        """The timer's end: True when no later change superseded it."""
        with self._lock:
            if self._known_at.get(arn) != at:
                return False
            del self._known_at[arn]
            return True

    def refuse_unknown(self, arn: str | None) -> None:
        with self._lock:
            pending = arn is not None and time.time() < self._known_at.get(arn, 0.0)
        if pending:
            from moto.ec2.exceptions import EC2ClientError

            raise EC2ClientError("InvalidParameterValue",
                                 f"Value ({arn}) for parameter iamInstanceProfile.arn is "
                                 "invalid. Invalid IAM Instance Profile ARN")


def _wrap(cls: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    wrapped = functools.wraps(getattr(cls, name))(make(getattr(cls, name)))
    setattr(wrapped, PATCHED, True)
    setattr(cls, name, wrapped)


def install(timings: Timings, recorder: Recorder) -> None:
    """Patch moto's IAM and EC2 models in this process (idempotent; nothing untimed)."""
    from moto.ec2.models.iam_instance_profile import IamInstanceProfileAssociationBackend
    from moto.iam.models import IAMBackend

    if not timings.on or getattr(IAMBackend.create_instance_profile, PATCHED, False):
        return
    known = Propagation(timings, recorder)

    def create(own: Callable[..., Any]) -> Callable[..., Any]:
        def create_instance_profile(self: Any, *args: Any, **kwargs: Any) -> Any:
            profile = own(self, *args, **kwargs)
            if serving() is not None:
                known.changed(profile.arn)
            return profile
        return create_instance_profile

    def add(own: Callable[..., Any]) -> Callable[..., Any]:
        def add_role_to_instance_profile(self: Any, profile_name: str, role_name: str) -> Any:
            result = own(self, profile_name, role_name)
            if serving() is not None:
                known.changed(self.get_instance_profile(profile_name).arn)
            return result
        return add_role_to_instance_profile

    def associate(own: Callable[..., Any]) -> Callable[..., Any]:
        def associate_iam_instance_profile(self: Any, instance_id: str,
                                           iam_instance_profile_name: str | None = None,
                                           iam_instance_profile_arn: str | None = None) -> Any:
            known.refuse_unknown(iam_instance_profile_arn)
            return own(self, instance_id, iam_instance_profile_name, iam_instance_profile_arn)
        return associate_iam_instance_profile

    _wrap(IAMBackend, "create_instance_profile", create)
    _wrap(IAMBackend, "add_role_to_instance_profile", add)
    _wrap(IamInstanceProfileAssociationBackend, "associate_iam_instance_profile", associate)
