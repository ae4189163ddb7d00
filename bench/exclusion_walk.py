"""What ``spec.exclusions`` can cost a reconcile: the hostile spec, in process.

A CronJob on ``* * * * *`` whose exclusions skip every time: 366 dates (none of them the
days walked, so each time is checked against every schedule) and ten exclusion
schedules (``MAX_SCHEDULES``), in three shapes: nine that never match before one that
matches every minute (the most schedules asked per time), the minutes in ten slices
(every time excluded by one of them, the order reversed), and one every-minute schedule.
Per shape, the benchmark reports the CPU time of:

* the next-time walk (``Window.next_after``, what ``limits.next_run`` asks when the
  schedule's next time does not run): it passes ``MAX_EXCLUDED_WALK`` (200) excluded
  times and gives up; cold (the schedule package's caches emptied first) and again a
  minute later (what the next reconcile asks);
* the skip accounting's step (``policies.account``): ``ACCOUNT_STEP`` (1,000) times, cold;

and the memory a ``limits`` memo entry keeps (its ``Window``, with the 366 dates).

    python -m bench.exclusion_walk [--dates 366]
"""

from __future__ import annotations

import argparse
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

if __package__ in (None, ""):  # run as a file: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import _common
from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import MAX_SCHEDULES
from cronjob_operator.controllers.cronjob import limits, policies
from cronjob_operator.schedule import _times
from cronjob_operator.schedule._window import MAX_EXCLUDED_WALK

START = datetime(2026, 3, 1, tzinfo=UTC)
SHAPES: dict[str, list[str]] = {
    "9 that never match, then * * * * *": [
        *(f"0 0 1 {month} *" for month in range(1, MAX_SCHEDULES)),
        "* * * * *",
    ],
    "the minutes in 10 slices, reversed": [
        f"{6 * n}-{6 * n + 5} * * * *" for n in reversed(range(MAX_SCHEDULES))
    ],
    "one * * * * *": ["* * * * *"],
}


def _cold() -> None:
    """Empty the caches a walk fills: croniter's steps, the pairs of times, the memo."""
    _times._step_wall.cache_clear()
    _times._BRACKETS.clear()
    limits._first_run_after.cache_clear()


def _cpu_ms(fn: Callable[[], object]) -> float:
    start = time.process_time()
    fn()
    return (time.process_time() - start) * 1000


def _window(dates: int, expressions: list[str]) -> schedules.Window:
    days = [(date(2027, 1, 1) + timedelta(days=n)).isoformat() for n in range(dates)]
    window = rules.parse_spec_window({"exclusions": {"dates": days, "schedules": expressions}})
    assert window is not None
    return window


def row(name: str, window: schedules.Window) -> list[object]:
    """The CPU of one walk cold and a minute later, and of one accounting step."""
    schedule = schedules.parse_schedule("* * * * *")
    _cold()
    cold = _cpu_ms(lambda: window.next_after(schedule, START))
    warm = _cpu_ms(lambda: window.next_after(schedule, START + timedelta(minutes=1)))
    end = START + timedelta(minutes=policies.ACCOUNT_STEP)
    _cold()
    accounting = _cpu_ms(
        lambda: policies.account(
            None,
            schedule,
            initial=START,
            floor=START,
            now=end,
            latest=end,
            reach=None,
            ran=(),
            pending=(),
            block=None,
            window=window,
        )
    )
    return [name, f"{cold:.0f}", f"{warm:.0f}", f"{accounting:.0f}"]


def window_kib(dates: int) -> float:
    """The memory one memo entry's ``Window`` keeps (its dates and schedules)."""
    expressions = SHAPES["the minutes in 10 slices, reversed"]
    tracemalloc.start()
    before = tracemalloc.take_snapshot()
    kept = [_window(dates, expressions) for _ in range(10)]
    grown = sum(
        stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(before, "filename")
    )
    tracemalloc.stop()
    return grown / len(kept) / 1024


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dates", type=int, default=366, help="excluded dates (366)")
    args = parser.parse_args(argv)
    rows = [row(name, _window(args.dates, shape)) for name, shape in SHAPES.items()]
    headers = [
        "exclusion schedules",
        "ms CPU, next-time walk (cold)",
        "a minute later",
        f"ms CPU, accounting {policies.ACCOUNT_STEP:,} times (cold)",
    ]
    kib = window_kib(args.dates)
    memo = kib * limits.NEXT_RUN_MEMO_SIZE / 1024
    _common.print_report(
        "Exclusion walk",
        [
            (
                f"`* * * * *` with {args.dates} excluded dates (not the days walked), every "
                f"time excluded; the walk passes {MAX_EXCLUDED_WALK} excluded times:",
                _common.markdown_table(headers, rows),
            )
        ],
        [
            f"a memo entry's Window with {args.dates} dates: {kib:.1f} KiB; "
            f"{limits.NEXT_RUN_MEMO_SIZE} entries of such windows: {memo:.1f} MiB",
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
