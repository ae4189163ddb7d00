"""The work one scheduled run costs the CronJob reconciler, counted rather than timed.

A run takes two reconciles: the one that creates its Job and the follow-up that writes
its status (the watch echo of that write is skipped when it brings nothing new, which
takes one more decision, ``reconciler._echo_brings_nothing``). Each count here is one
that a change once cut; a regression shows as a count, never as a timing (the CPU
figures are ``python -m bench.run_cost``'s).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.controllers.cronjob import reconciler
from cronjob_operator.runtime.fake import DEFAULT_START
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness

DUE = DEFAULT_START + timedelta(hours=1, minutes=30)


def harness() -> cronjob_harness.Harness:
    """A CronJob created at ``DEFAULT_START`` that runs once a day at ``DUE``, its
    status written (the startup reconcile)."""
    spec = {"schedule": f"{DUE.minute} {DUE.hour} * * *"}
    body = cronjob_harness.cronjob("a", "ns", created=DEFAULT_START, spec=spec)
    cluster = cronjob_harness.Harness(body, start=DEFAULT_START, namespace="ns", name="a")
    cluster.reconcile_at(DEFAULT_START)
    return cluster


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times the schedule was walked (``schedule.most_recent_due``)."""
    counted: Counter[str] = Counter()
    monkeypatch.setattr(
        schedules, "most_recent_due", _counting(counted, schedules, "most_recent_due")
    )
    return counted


@pytest.fixture
def decisions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many times the reconciler decided (``decide``)."""
    counted: Counter[str] = Counter()
    monkeypatch.setattr(reconciler, "decide", _counting(counted, reconciler, "decide"))
    return counted


def _counting(counted: Counter[str], module: Any, name: str) -> Callable[..., Any]:
    """``module.name``, counting its calls in ``counted[name]``."""
    original = getattr(module, name)

    def count(*args: Any, **kwargs: Any) -> Any:
        counted[name] += 1
        return original(*args, **kwargs)

    return count


def test_the_follow_up_and_its_echo_check_walk_the_schedule_once(walks: Counter[str]) -> None:
    # Failed before (the echo check decided with a Walks of its own): 2 walks, the
    # check repeating the follow-up's walk from the same lastScheduleTime at the same now.
    cluster = harness()
    assert cluster.reconcile_once_at(DUE).follow_up  # creates the Job
    walks.clear()
    cluster.reconcile_once_at(DUE)
    assert cluster.status()["lastScheduleTime"], "the follow-up wrote the run's status"
    assert walks["most_recent_due"] == 1


def test_the_reconcile_that_creates_a_job_decides_once(decisions: Counter[str]) -> None:
    # Failed before (the decision ended at the create with ``pending``, and the
    # reconciler decided again with its outcome): 2 decisions.
    cluster = harness()
    decisions.clear()
    assert cluster.reconcile_once_at(DUE).follow_up
    assert len(cluster.jobs()) == 1
    assert decisions["decide"] == 1


def test_a_replace_decides_once_and_deletes_before_it_creates(
    decisions: Counter[str],
) -> None:
    # Failed before: 3 decisions (the Replace delete, then the create, each ended the
    # decision with ``pending``).
    spec = {"schedule": "*/5 * * * *", "concurrencyPolicy": "Replace"}
    body = cronjob_harness.cronjob("a", "ns", created=DEFAULT_START, spec=spec)
    cluster = cronjob_harness.Harness(body, start=DEFAULT_START, namespace="ns", name="a")
    first = DEFAULT_START + timedelta(minutes=5)
    cluster.reconcile_at(first)
    (old,) = cluster.jobs()
    decisions.clear()
    assert cluster.reconcile_once_at(first + timedelta(minutes=5)).follow_up
    assert decisions["decide"] == 1
    writes = [(write.verb, write.name) for write in cluster.client.writes if write.kind == JOB]
    (new,) = set(cluster.jobs()) - {old}
    assert writes[-2:] == [("delete", old), ("create", new)]
