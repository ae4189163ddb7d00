"""Large allocations go back to the system when freed (glibc's fixed mmap threshold).

glibc serves an allocation above its mmap threshold (128 KiB at start) with its own
``mmap`` and unmaps it on ``free``. But the first such block freed raises the threshold to
its size (up to 32 MiB), so later blocks of that size come from the heap of whichever
arena the thread uses, and a freed block there is kept for reuse by that arena. A
process whose many threads each read and free a body of some MiB (the webhook server)
then keeps several such blocks per arena: under issue 35's attacks all at once, the
serving process peaked at 209 MiB this way, and at 84 MiB with the threshold fixed
(``python -m bench.hostile_clients --section webhooks``, bench/README.md). Setting the
threshold (``M_MMAP_THRESHOLD``) also turns the dynamic adjustment off, as glibc
documents; the ``MALLOC_MMAP_THRESHOLD_`` environment variable does the same.
"""

from __future__ import annotations

import ctypes
import logging
import sys
from typing import Final

log = logging.getLogger(__name__)

MMAP_THRESHOLD: Final = 1024 * 1024
"""Blocks of at least this size are mapped on their own and unmapped when freed: request
bodies and their decoded strings, not the small objects the caches are made of."""

_M_MMAP_THRESHOLD: Final = -3
"""glibc's ``mallopt`` parameter number (malloc.h)."""


def release_large_allocations() -> bool:
    """Fix glibc's mmap threshold at ``MMAP_THRESHOLD``; False where there is no glibc."""
    if not sys.platform.startswith("linux"):
        return False
    mallopt = getattr(ctypes.CDLL(None), "mallopt", None)  # the process's own C library
    if mallopt is None:  # musl and other C libraries without it
        return False
    if not mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        log.warning("mallopt(M_MMAP_THRESHOLD) failed: freed request bodies may stay mapped")
        return False
    return True
