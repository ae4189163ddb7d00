"""Run request memo: the memory a full memo of parsed run requests holds, and what it saves.

The controller reads the run request annotation on every reconcile of its CronJob, so
``api.run_overrides`` remembers the parsed value of the last requests it read (an LRU of
``maxsize`` entries, each request at most ``MAX_RUN_REQUEST_LENGTH`` bytes). A parsed
request holds a Python object per string, so an entry can be many times larger than its
JSON: this benchmark fills the memo with requests of the largest size in four shapes
(many 2-character args, the costliest; many variables; many variables read from a
Secret's key; one long value) and reports the
memory the memo holds (its keys and values, ``tracemalloc``), and the process CPU of a
parse against a memo hit.

    python -m bench.run_request_memo [--repeat 7] [--min-time 0.05]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator.api import run_overrides
from cronjob_operator.api.run_overrides import MAX_RUN_REQUEST_LENGTH, parse_run_request

_memo = run_overrides._parse_json_request


def _args(count: int) -> dict[str, Any]:
    return {"containers": [{"name": "main", "args": [f"{i % 100:02d}" for i in range(count)]}]}


def _env(count: int) -> dict[str, Any]:
    return {"env": [{"name": f"V{i}", "value": ""} for i in range(count)]}


def _key_refs(count: int) -> dict[str, Any]:
    names = [f"{i % 100:02d}" for i in range(count)]  # 2 characters: no shared singleton
    return {
        "env": [
            {"name": f"V{i}", "valueFrom": {"secretKeyRef": {"name": name, "key": name}}}
            for i, name in enumerate(names)
        ]
    }


def _value(count: int) -> dict[str, Any]:
    return {"env": [{"name": "V", "value": "x" * count}]}


SHAPES: dict[str, Callable[[int], dict[str, Any]]] = {
    "args of 2 characters": _args,
    "variables": _env,
    "variables from a Secret's key": _key_refs,
    "one long value": _value,
}


def request(shape: Callable[[int], dict[str, Any]], count: int, token: str) -> str:
    """The run request annotation value of ``shape`` at ``count``."""
    return json.dumps({"token": token, "overrides": shape(count)}, separators=(",", ":"))


def _token(index: int) -> str:
    """Tokens of one length, so every request of a count has one size."""
    return f"t{index:04d}"


def largest_count(shape: Callable[[int], dict[str, Any]]) -> int:
    """The largest count of ``shape`` within the bound (a binary search)."""
    low, high = 0, MAX_RUN_REQUEST_LENGTH
    while low < high:
        middle = (low + high + 1) // 2
        fits = len(request(shape, middle, _token(0)).encode()) <= MAX_RUN_REQUEST_LENGTH
        low, high = (middle, high) if fits else (low, middle - 1)
    return low


def held_by_full_memo(shape: Callable[[int], dict[str, Any]], count: int) -> float:
    """The MiB a memo full of requests of ``shape`` at ``count`` holds."""
    _memo.cache_clear()
    gc.collect()
    tracemalloc.start()
    entries = _memo.cache_info().maxsize or 0
    for i in range(entries):
        parse_run_request(request(shape, count, _token(i)))  # the memo keeps the key
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    if _memo.cache_info().currsize != entries:
        raise RuntimeError(f"the memo holds {_memo.cache_info().currsize}, not {entries}")
    _memo.cache_clear()
    return held / 2**20


def measure(name: str, timing: _common.Timing) -> list[object]:
    """One row: the shape, the request's bytes, the memo's MiB, parse and hit CPU."""
    shape = SHAPES[name]
    count = largest_count(shape)
    held = held_by_full_memo(shape, count)
    raw = request(shape, count, _token(0))
    parse = timing.per_call(lambda: _memo.__wrapped__(raw))
    parse_run_request(raw)
    hit = timing.per_call(lambda: parse_run_request(raw))
    size = len(raw.encode())
    return [name, f"{size:,}", f"{held:.1f}", f"{parse * 1e3:.3f} ms", f"{hit * 1e6:.1f} us"]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the arguments, run, print the report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.Timing.add_arguments(parser)
    timing = _common.Timing.from_arguments(parser.parse_args(argv))
    entries = _memo.cache_info().maxsize
    table = _common.markdown_table(
        ["request shape", "bytes", f"MiB held by {entries} entries", "parse", "memo hit"],
        [measure(name, timing) for name in SHAPES],
    )
    _common.print_report(
        "Run request memo",
        [(f"A full memo; median process CPU over {timing.repeat} timeit samples:", table)],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
