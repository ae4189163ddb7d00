"""Stagger's pure rules: the offset is stable, in range and spread; the shortest gap; the refusal.

The reconciler's staggered runs are tested in test_cronjob_requests_and_conditions.py
(through ``cronjob_harness``).
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.api.cronjob_rules import (
    shortest_gap,
    stagger_offset,
    stagger_problem,
)

HOUR = timedelta(hours=1)


def test_stagger_offset_is_stable_in_range_and_spread() -> None:
    offsets = {stagger_offset("ns", f"cj-{n}", 300) for n in range(200)}
    assert all(timedelta(0) <= o <= timedelta(seconds=300) for o in offsets)
    assert len(offsets) > 100, "200 CronJobs spread over many offsets"
    assert stagger_offset("ns", "a", 300) == stagger_offset("ns", "a", 300)
    assert stagger_offset("ns", "a", 0) == timedelta(0)


@pytest.mark.parametrize("stagger", [1, 2])
def test_a_small_stagger_uses_every_offset_from_0_to_stagger(stagger: int) -> None:
    offsets = {stagger_offset("ns", f"cj-{n}", stagger) for n in range(50)}
    assert offsets == {timedelta(seconds=s) for s in range(stagger + 1)}


def test_stagger_offsets_do_not_change_between_releases() -> None:
    """sha256("<namespace>/<name>"), first 8 bytes big-endian, mod (stagger + 1): an
    upgrade that changed the hash would move every staggered CronJob's runs."""
    assert [stagger_offset("ns", n, 300).total_seconds() for n in ("cj", "a")] == [
        285,
        69,
    ]


@pytest.mark.parametrize(
    ("expression", "zone", "gap"),
    [
        ("*/15 * * * *", None, timedelta(minutes=15)),
        ("@hourly", None, HOUR),
        ("@every 90m", None, timedelta(minutes=90)),
        ("0 1,3 * * *", None, 2 * HOUR),
        # The spring-forward day: 01:00 EST to 03:00 EDT is one hour.
        ("0 1,3 * * *", "America/New_York", HOUR),
        # 24 runs a day: the first 1,000 end in February, before the spring-forward day
        # (01:40 EST to 03:00 EDT is 20 minutes), which only the scan around it finds.
        ("0,40 1-23/2 * * *", None, timedelta(minutes=40)),
        ("0,40 1-23/2 * * *", "America/New_York", timedelta(minutes=20)),
        ("0 0 29 2 *", None, None),  # once in the scanned span
    ],
)
def test_shortest_gap(expression: str, zone: str | None, gap: timedelta | None) -> None:
    shortest_gap.cache_clear()  # computed here, not remembered from another test
    assert shortest_gap(schedules.parse_schedule(expression, zone)) == gap


def test_stagger_problem_names_the_numbers() -> None:
    hourly = schedules.parse_schedule("0 1,3 * * *", "America/New_York")
    assert stagger_problem(hourly, 3599) is None
    assert stagger_problem(hourly, 0) is None, "0 is no stagger, and valid"
    problem = stagger_problem(hourly, 3600)
    assert problem is not None
    assert "(3600 seconds)" in problem
    assert "use at most 3599" in problem
    assert stagger_problem(None, 4000) == "must be between 0 and 3600 seconds"
    assert stagger_problem(schedules.parse_schedule("@every 30s"), 30) is not None
