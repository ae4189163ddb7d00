"""``release_large_allocations``: a freed block of some MiB goes back to the system.

Counted in a fresh interpreter with glibc's own ``mallinfo2().hblks`` (blocks mapped on
their own): without the fixed threshold, glibc maps the first 7 MiB block and, once it is
freed, serves the next ones from an arena's heap, which keeps them (issue 35: 209 MiB
instead of 84 MiB under the webhook attacks); with it, every such block is mapped and
unmapped.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import ctypes, json, sys
FIELDS = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in FIELDS.split()]
libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "fixed":
    from cronjob_operator.runtime.serving import release_large_allocations
    assert release_large_allocations()
mapped = []
for _ in range(3):
    before = libc.mallinfo2().hblks
    block = bytes(7 * 1024 * 1024)
    mapped.append(libc.mallinfo2().hblks - before)
    del block
print(json.dumps(mapped))
"""


def mapped_blocks(mode: str) -> list[int]:
    """For three 7 MiB blocks allocated and freed in turn: whether each was mapped."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True
    )
    result: list[int] = json.loads(done.stdout)
    return result


def test_with_the_threshold_fixed_every_large_block_is_mapped_and_given_back() -> None:
    assert mapped_blocks("default") == [1, 0, 0]  # glibc raised its threshold to 7 MiB
    assert mapped_blocks("fixed") == [1, 1, 1]
