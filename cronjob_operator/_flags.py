"""Flag value types shared by the two command lines: the operator (``cli``) and the
kubectl plugin (``plugin``).

Each is an ``argparse`` ``type=``: it returns the parsed value, or raises
``ArgumentTypeError`` with a message naming the value and the rule, which argparse
prints after the flag's name. Types that only one command line uses stay in its module.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """A whole number of at least 1 (a count, a concurrency, a burst)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value
