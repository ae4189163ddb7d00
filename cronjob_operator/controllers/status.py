"""What every reconciler shares about time and status: the injectable clock and the status write.

``Clock`` is how reconcilers read "now" (tests inject a fake one, so no schedule test
depends on the wall clock). ``write_status`` writes a status subresource only when it
changed (a no-op reconcile makes zero API writes) and retries a 409 Conflict against a
fresh read, so a computed status is never dropped; if the object was replaced by a new
one of the same name (another uid), nothing is written.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import Client
from cronjob_operator.runtime.kinds import Kind

__all__ = ["STATUS_WRITE_ATTEMPTS", "Clock", "utc_now", "write_status"]

STATUS_WRITE_ATTEMPTS = 5

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    """The wall clock, the default ``Clock``."""
    return datetime.now(UTC)


def write_status(
    client: Client,
    kind: Kind,
    obj: objects.Obj,
    status: dict[str, Any],
    *,
    attempts: int = STATUS_WRITE_ATTEMPTS,
) -> bool:
    """Write ``status`` to ``obj``'s status subresource if it changed; True if written.

    A Conflict is retried against a fresh read from the API server (up to ``attempts``
    writes in all). Other errors raise.
    """
    if status == objects.thaw(obj.get("status") or {}):
        return False
    metadata = obj["metadata"]
    body = {**objects.thaw(obj), "status": status}
    for attempt in range(1, attempts + 1):
        try:
            client.update_status(kind, body)
            return True
        except errors.Conflict:
            if attempt == attempts:
                raise
            fresh = client.live.get(kind, metadata["name"], metadata.get("namespace"))
            if (fresh.get("metadata") or {}).get("uid") != metadata.get("uid"):
                return False
            body = {**objects.thaw(fresh), "status": status}
    return False
