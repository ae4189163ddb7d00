"""Go's ``time.ParseDuration``, for ``@every <duration>``.

robfig/cron hands the text after ``@every`` to Go's ``time.ParseDuration``, so the
built-in CronJob accepts exactly the durations Go does: a sequence of decimal numbers,
each with an optional fraction and a unit (``ns``, ``us``/``µs``, ``ms``, ``s``, ``m``,
``h``), optionally signed, with leading zeros of any length, ``0`` alone, and nothing
that overflows int64 nanoseconds. What it means for a schedule (whole seconds, at least
one) is decided by the grammar; this module only reads the number.

The digit rule is shared with the grammar's numbers (Go's ``strconv.Atoi``): only the
significant digits count, so a long run of leading zeros is fine and ``int()`` never meets
Python's limit on digits.
"""

from __future__ import annotations

import re
from typing import Final

INT64_MAX: Final = (1 << 63) - 1

_GO_UNITS: Final = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_GO_DURATION_PART: Final = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration(text: str) -> int | None:
    """Go's time.ParseDuration, in nanoseconds; None where Go returns an error."""
    body = text[1:] if text[:1] in ("+", "-") else text
    negative = text[:1] == "-"
    if body == "0":
        return 0
    if not body:
        return None
    total = 0
    position = 0
    while position < len(body):
        match = _GO_DURATION_PART.match(body, position)
        if match is None or match.end() == position:
            return None
        whole, fraction, unit = match.groups()
        if not whole and not fraction:
            return None  # no digits, e.g. ".s"
        number = significant_int(whole)
        if number is None or number > 1 << 63:
            return None  # overflows int64 (leading zeros are fine, as in Go)
        if unit not in _GO_UNITS:
            return None
        scale = _GO_UNITS[unit]
        value = number * scale
        if fraction:
            # Go computes the fraction in float64 too, from the digits that fit in int64.
            digits = fraction[:18]
            value += int(int(digits) * (scale / 10 ** len(digits)))
        total += value
        if total > 1 << 63:
            return None
        position = match.end()
    if negative:
        return -total
    return total if total <= INT64_MAX else None


def significant_int(digits: str) -> int | None:
    """The value of a decimal digit string, or None when it has more than 20 significant
    digits (more than any uint64; callers check their own bound)."""
    significant = digits.lstrip("0")
    return int(significant or "0") if len(significant) <= 20 else None
