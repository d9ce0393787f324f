"""EBS in the timed sandbox (`sandbox start --timings aws[:SCALE]`), each wait a state
shown at once and a timer that ends it (no CPU), recorded in the timeline:

- CreateVolume from a snapshot: the volume is ``creating`` for the volume-from-snapshot
  wait; AttachVolume on it meanwhile is refused (``IncorrectState``, as AWS refuses it);
- AttachVolume: the attachment is ``attaching`` for the attach wait;
- RunInstances with a snapshot in its block devices (a dataset clone made with the
  node): that volume is ``creating`` and its attachment ``attaching`` for the
  volume-from-snapshot wait (the attach is part of the launch);
- CreateSnapshot(s), CopySnapshot, and the EBS direct APIs' CompleteSnapshot: the
  snapshot is ``pending`` for the snapshot-completion wait.

Only what the API call itself made is held (``timed.serving``): the volumes and
snapshots moto makes for itself (RunInstances' root volume, StartSnapshot's scratch
volume, AMIs' snapshots) are not. A node shows a volume's device only once it is
settled (the agent asks ``moto_models.unsettled_volume_ids``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from clusterkit_sandbox import moto_models as mm
from clusterkit_sandbox.timed import Recorder, hold, serving
from clusterkit_sandbox.timings import Timings, Wait

PATCHED = "__clusterkit_timed__"
SNAPSHOT_CALLS = ("CreateSnapshot", "CreateSnapshots", "CopySnapshot")


def _creating(volume: Any, timings: Timings, recorder: Recorder) -> None:
    mm.set_volume_state(volume, "creating")
    hold(Wait.VOLUME_FROM_SNAPSHOT, volume.id, timings.wait(Wait.VOLUME_FROM_SNAPSHOT),
         lambda: mm.set_volume_state(volume, None), recorder)


def _attaching(volume: Any, timings: Timings, recorder: Recorder) -> None:
    mm.set_attachment_state(volume, "attaching")
    hold(Wait.VOLUME_ATTACH, volume.id, timings.wait(Wait.VOLUME_ATTACH),
         lambda: mm.set_attachment_state(volume, "attached", only_from="attaching"),
         recorder)


def _pending(snapshot: Any, timings: Timings, recorder: Recorder) -> None:
    mm.set_snapshot_state(snapshot, "pending")
    hold(Wait.SNAPSHOT_COMPLETE, snapshot.id, timings.wait(Wait.SNAPSHOT_COMPLETE),
         lambda: mm.set_snapshot_state(snapshot, "completed", only_from="pending"), recorder)


def _launched_clone(volume: Any, timings: Timings, recorder: Recorder) -> None:
    mm.set_volume_state(volume, "creating")
    mm.set_attachment_state(volume, "attaching")

    def settle() -> bool:
        mm.set_attachment_state(volume, "attached", only_from="attaching")
        return mm.set_volume_state(volume, None)

    hold(Wait.VOLUME_FROM_SNAPSHOT, volume.id, timings.wait(Wait.VOLUME_FROM_SNAPSHOT),
         settle, recorder)


def _refuse_unready(volume_id: str, state: str) -> None:
    from moto.ec2.exceptions import EC2ClientError

    raise EC2ClientError("IncorrectState", f"{volume_id} is not 'available' ({state}).")


def _wrap(cls: Any, name: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    wrapped = make(getattr(cls, name))
    setattr(wrapped, PATCHED, True)
    setattr(cls, name, wrapped)


def install(timings: Timings, recorder: Recorder) -> None:
    """Patch moto's EC2 and EBS models in this process (idempotent; nothing untimed)."""
    from moto.ebs.responses import EBSResponse
    from moto.ec2.models import EC2Backend

    if not timings.on or getattr(EC2Backend.create_volume, PATCHED, False):
        return

    def create_volume(own: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(own)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            volume = own(self, *args, **kwargs)
            if serving() == "CreateVolume" and volume.snapshot_id:
                _creating(volume, timings, recorder)
            return volume
        return wrapper

    def attach_volume(own: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(own)
        def wrapper(self: Any, volume_id: str, *args: Any, **kwargs: Any) -> Any:
            if serving() != "AttachVolume":
                return own(self, volume_id, *args, **kwargs)
            if (state := self.get_volume(volume_id).status) == "creating":
                _refuse_unready(volume_id, state)
            made = own(self, volume_id, *args, **kwargs)
            _attaching(self.get_volume(volume_id), timings, recorder)
            return made
        return wrapper

    def snapshot_call(own: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(own)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            snapshot = own(self, *args, **kwargs)
            if serving() in SNAPSHOT_CALLS and not getattr(snapshot, "from_ami", None):
                _pending(snapshot, timings, recorder)
            return snapshot
        return wrapper

    _wrap(EC2Backend, "create_volume", create_volume)
    _wrap(EC2Backend, "attach_volume", attach_volume)
    _wrap(EC2Backend, "create_snapshot", snapshot_call)
    _wrap(EC2Backend, "copy_snapshot", snapshot_call)
    _wrap(EBSResponse, "complete_snapshot", lambda own: _completed_later(own, timings, recorder))
    _install_launch_clones(timings, recorder)


def _completed_later(own: Callable[..., Any], timings: Timings,
                     recorder: Recorder) -> Callable[..., Any]:
    """CompleteSnapshot's handler: whatever the EBS backend (and the sandbox's
    ebs_direct patch) set, the snapshot is pending for the completion wait from here."""
    @functools.wraps(own)
    def wrapper(self: Any) -> Any:
        result = own(self)
        snapshot_id = self._get_param("SnapshotId")
        _pending(mm.direct_snapshot_ec2(self.ebs_backend, snapshot_id), timings, recorder)
        return result
    return wrapper


def _install_launch_clones(timings: Timings, recorder: Recorder) -> None:
    from moto.ec2.models.instances import InstanceBackend

    def run_instances(own: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(own)
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            reservation = own(self, *args, **kwargs)
            for instance in reservation.instances:
                for volume in mm.launch_clones(instance):
                    _launched_clone(volume, timings, recorder)
            return reservation
        return wrapper

    _wrap(InstanceBackend, "run_instances", run_instances)
