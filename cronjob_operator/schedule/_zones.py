"""Time zones: which ``spec.timeZone`` names are usable, and wall-clock times as instants.

Schedule times are wall-clock times in ``spec.timeZone`` (UTC when unset): a daily 09:00
in America/New_York is 14:00Z in winter and 13:00Z in summer. A zone is accepted when
the built-in CronJob accepts it: an IANA name whose every part passes upstream's
``validateTimeZone`` check and that the zone database knows; ``Local``, ``localtime``
and the empty string are refused, since the controller's own zone is not the user's.

Turning a wall-clock time into instants is where the DST rules start: :func:`instants`
says that a time in a spring-forward gap does not occur that day, and that a time in a
fall-back repeat occurs twice (first and second pass); :func:`fold_length` says how long
the repeat around an instant is. Which of those occurrences are schedule times is the
walker's decision (``_times``). The remaining helpers keep every instant aware and in
UTC, and turn a step past year 1 or year 9999 into None instead of an exception.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronjob_operator.schedule._errors import TIME_ZONE_FIELD, quote

_ZERO: Final = timedelta(0)
# The built-in CronJob's check on each part of a time zone name (validateTimeZone).
_ZONE_PART: Final = re.compile(r"[A-Za-z.\-_0-9+]{1,14}")


def load_zone(name: str) -> ZoneInfo | None:
    """The zone named ``name``, or None when the built-in CronJob would refuse it."""
    if not name or name.lower() in ("local", "localtime"):
        return None
    for part in name.split("/"):
        if part in (".", "..") or part.startswith("-") or not _ZONE_PART.fullmatch(part):
            return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        return None


def validate_time_zone(name: str) -> str | None:
    """Why ``spec.timeZone`` cannot be ``name``, or None when it is a usable IANA zone."""
    if load_zone(name) is not None:
        return None
    quoted = quote(name)
    if not name:
        return (
            f"{TIME_ZONE_FIELD}: {quoted}: must not be empty; leave it unset for UTC or use an "
            'IANA name such as "Europe/Berlin"'
        )
    if name.lower() in ("local", "localtime"):
        return (
            f"{TIME_ZONE_FIELD}: {quoted}: the controller's local zone is not allowed; use an "
            'explicit IANA name such as "Europe/Berlin" or "UTC"'
        )
    return (
        f"{TIME_ZONE_FIELD}: {quoted}: unknown time zone; use an IANA name such as "
        '"Europe/Berlin", "America/New_York" or "UTC"'
    )


def as_utc(t: datetime, name: str) -> datetime:
    """``t`` in UTC; a naive ``t`` is a caller's mistake, reported with the parameter's name."""
    if t.tzinfo is None or t.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, not naive {t.isoformat()}")
    return t.astimezone(UTC)


def add(t: datetime, delta: timedelta) -> datetime | None:
    """``t + delta``, or None when that is before year 1 or after year 9999."""
    try:
        return t + delta
    except OverflowError:
        return None


def floor_second(t: datetime) -> datetime:
    """``t`` without its fraction of a second."""
    return t.replace(microsecond=0)


def floor_minute(t: datetime) -> datetime:
    """``t`` at the start of its minute."""
    return t.replace(second=0, microsecond=0)


def _offset(t: datetime) -> timedelta:
    offset = t.utcoffset()
    assert offset is not None, "zoneinfo always has an offset"
    return offset


def fold_length(wall: datetime) -> timedelta:
    """How long the wall-clock time of the aware ``wall`` repeats (zero if it does not)."""
    return max(_offset(wall.replace(fold=0)) - _offset(wall.replace(fold=1)), _ZERO)


def instants(naive: datetime, zone: ZoneInfo) -> tuple[datetime | None, datetime | None]:
    """The instants (UTC) at which the wall-clock time ``naive`` occurs in ``zone``:
    (None, None) in a spring-forward gap, (first, second) in a repeated hour, else
    (only, None)."""
    first_offset = _offset(naive.replace(tzinfo=zone, fold=0))
    second_offset = _offset(naive.replace(tzinfo=zone, fold=1))
    first = (naive - first_offset).replace(tzinfo=UTC)
    if first_offset == second_offset:
        return first, None
    if first.astimezone(zone).replace(tzinfo=None) != naive:
        return None, None
    return first, (naive - second_offset).replace(tzinfo=UTC)
