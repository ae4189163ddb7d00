"""How a schedule problem reaches the user: the fields it names and :class:`ScheduleError`.

Every message about a schedule or a time zone starts with the field and the quoted value
(``spec.schedule: "<value>": <detail>``) and ends with what would fix it; the admission
webhook relies on that shape to turn a message into a field error. ``ScheduleError``
carries the reason the controller reports on the CronJob (``UnparseableSchedule``,
``InvalidSchedule`` for a schedule that never fires, ``UnknownTimeZone``) and the field.
"""

from __future__ import annotations

from typing import Final, Literal

Reason = Literal["UnparseableSchedule", "InvalidSchedule", "UnknownTimeZone"]

SCHEDULE_FIELD: Final = "spec.schedule"
TIME_ZONE_FIELD: Final = "spec.timeZone"


class ScheduleError(ValueError):
    """A schedule or time zone the controller cannot use; the message names the field."""

    def __init__(self, reason: Reason, field: str, message: str) -> None:
        super().__init__(message)
        self.reason: Reason = reason
        self.field = field


def quote(text: str) -> str:
    """``text`` as the messages show a value: in double quotes, ``\\`` and ``"`` escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
