"""EFS in the timed sandbox (`sandbox start --timings aws[:SCALE]`): a file system made
by CreateFileSystem, and a mount target made by CreateMountTarget, are ``creating``
until a timer makes them ``available`` (no CPU), each recorded in the timeline.

Only what an API call made is held (``timed.serving``): a stack's file system is held by
the stack itself (``timed_cfn``: CloudFormation's resource is done when it is available).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from clusterkit_sandbox import moto_models as mm
from clusterkit_sandbox.timed import Recorder, hold, serving
from clusterkit_sandbox.timings import Timings, Wait

PATCHED = "__clusterkit_timed__"


def _creating(what: Wait, made: Any, resource_id: str, timings: Timings,
              recorder: Recorder) -> None:
    mm.set_lifecycle_state(made, "creating")
    hold(what, resource_id, timings.wait(what),
         lambda: mm.set_lifecycle_state(made, "available", only_from="creating"), recorder)


def install(timings: Timings, recorder: Recorder) -> None:
    """Patch moto's EFS backend in this process (idempotent; nothing untimed)."""
    from moto.efs.models import EFSBackend

    if not timings.on or getattr(EFSBackend.create_file_system, PATCHED, False):
        return

    def held(own: Callable[..., Any], what: Wait, id_of: Callable[[Any], str]) -> Any:
        @functools.wraps(own)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            made = own(self, *args, **kwargs)
            if serving() is not None:
                _creating(what, made, id_of(made), timings, recorder)
            return made
        setattr(wrapper, PATCHED, True)
        return wrapper

    EFSBackend.create_file_system = held(EFSBackend.create_file_system, Wait.EFS_FILE_SYSTEM,
                                         lambda fs: fs.file_system_id)
    EFSBackend.create_mount_target = held(EFSBackend.create_mount_target,
                                          Wait.EFS_MOUNT_TARGET, lambda mt: mt.mount_target_id)
