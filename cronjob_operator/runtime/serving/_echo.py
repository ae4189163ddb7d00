"""Request values shown back in an answer or a log, cut to a bound.

A server that repeats what a client sent, in an error message or a log line, lets one
request of a few MiB make a response and a log line of the same size (a 15 MiB
``apiVersion`` once gave a 15.7 MB log line). Every value that came from a request is
shown through one of these functions: at most ``ECHO_LIMIT`` characters of it, then an
ellipsis and the original length, so the message still says what was wrong.
"""

from __future__ import annotations

import json
import reprlib
from typing import Final

ECHO_LIMIT: Final = 256
"""Characters of a request value shown in a message or a log line."""


def _bounded_repr() -> reprlib.Repr:
    """``repr`` that never walks deep or wide structures (no RecursionError, bounded time)."""
    bounded = reprlib.Repr()
    bounded.maxlevel = 3
    bounded.maxstring = bounded.maxother = ECHO_LIMIT
    return bounded


_BOUNDED: Final = _bounded_repr()


def shortened(value: object, limit: int = ECHO_LIMIT) -> str:
    """A request value as text (a string itself, anything else its ``clipped`` repr): whole
    when short, else its first ``limit`` characters, ``…`` and its length."""
    if not isinstance(value, str):
        return clipped(value, limit)
    if len(value) <= limit:
        return value
    return f"{value[:limit]}… ({len(value)} characters)"


def clipped(value: object, limit: int = ECHO_LIMIT) -> str:
    """``repr`` of a request value, shortened (a long string shows its full length)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}… ({len(value)} characters)"
    return shortened(_BOUNDED.repr(value), limit)  # a str: no further recursion


def clipped_json(value: object, limit: int = ECHO_LIMIT) -> str:
    """A request value as JSON (as apimachinery's field errors show it), shortened."""
    if isinstance(value, str) and len(value) > limit:
        return f"{json.dumps(value[:limit], ensure_ascii=False)}… ({len(value)} characters)"
    if isinstance(value, dict | list):
        return clipped(value, limit)  # no walk over a deep or huge structure
    return shortened(json.dumps(value, ensure_ascii=False), limit)
