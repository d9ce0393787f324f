"""Clients reused per (session, service, region): making a botocore client costs tens of
milliseconds (model loading), and one `up` or `down` talks to the same few services
dozens of times. Clients come from aws.session.client (retry policy + net guard)."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from clusterkit.aws.session import client

_lock = threading.Lock()
_cache: weakref.WeakKeyDictionary[Any, dict[tuple[str, str | None], Any]] = \
    weakref.WeakKeyDictionary()


def cached_client(session: Any, service: str, region: str | None = None) -> Any:
    key = (service, region or session.region_name)
    with _lock:
        per_session = _cache.setdefault(session, {})
        if key not in per_session:
            per_session[key] = client(session, service, region)
        return per_session[key]
