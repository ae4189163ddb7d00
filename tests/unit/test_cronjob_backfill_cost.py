"""What a backfill request costs the manager (issue 35 item 4): paid once, and bounded.

The probe counts schedule evaluations of a backfill range: calls of
``schedule.times_between`` with the backfill's limit (``MAX_BACKFILL + 1``; the skip
accounting walks with ``ACCOUNT_STEP``). No timing is asserted; ``bench.reconcile_cost``
prints the CPU.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, MAX_BACKFILL
from cronjob_operator.api.cronjob_rules import END_OF_JOB_TIMES, FIRST_JOB_TIME, JOB_TIME_DIGITS
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.webhooks import cronjob as webhook
from tests.unit.cronjob_harness import Harness
from tests.unit.test_cronjob_backfill import a_world_a_day_in, ask, progress, request
from tests.unit.test_cronjob_policies import NAME, NS, at, created_order, settle

FIELD = f"metadata.annotations[{BACKFILL_ANNOTATION}]"


class Walks:
    """The backfill range evaluations seen: (after, through) of each."""

    def __init__(self) -> None:
        self.ranges: list[tuple[datetime, datetime]] = []

    def __len__(self) -> int:
        return len(self.ranges)


def count_backfill_walks(monkeypatch: pytest.MonkeyPatch) -> Walks:
    """Count backfill range evaluations from now on, starting from an empty memo."""
    seen = Walks()
    real = schedules.times_between

    def counting(
        schedule: schedules.AnySchedule, after: datetime, through: datetime, *, limit: int
    ) -> Iterator[datetime]:
        if limit == MAX_BACKFILL + 1:
            seen.ranges.append((after, through))
        return real(schedule, after, through, limit=limit)

    monkeypatch.setattr(schedules, "times_between", counting)
    rules._remembered_times.cache_clear()
    return seen


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> Iterator[Walks]:
    yield count_backfill_walks(monkeypatch)
    rules._remembered_times.cache_clear()


def test_a_completed_backfill_costs_no_schedule_evaluation_however_often_reconciled(
    walks: Walks,
) -> None:
    world = a_world_a_day_in(schedule="* * * * *")
    ask(world, request("t1", at(2), at(3)))
    settle(world, at(24.01))
    assert progress(world)["done"] == 60
    started = len(walks)
    rules._remembered_times.cache_clear()  # nothing remembered: the state must say it
    for minute in range(2, 30):
        touch(world, str(minute))
        settle(world, at(24) + timedelta(minutes=minute, seconds=30))
    assert len(walks) == started, "a completed backfill walked its range again"
    assert progress(world)["state"] == "Complete"


def touch(world: Harness, value: str) -> None:
    """An edit that changes nothing the controller reads: one more reconcile."""
    world.edit(lambda body: body["metadata"].setdefault("labels", {}).update(touched=value))


def test_a_running_backfill_walks_its_range_once_for_all_its_reconciles(walks: Walks) -> None:
    world = a_world_a_day_in(concurrencyPolicy="Forbid")
    world.finish(job_name(NAME, at(24)))
    ask(world, request("t1", at(2), at(6)))
    reconciles = 0
    for hour in (2, 3, 4, 5):
        reconciles += settle(world, at(24.25))
        world.finish(job_name(NAME, at(hour)))
    reconciles += settle(world, at(24.25))
    assert progress(world)["state"] == "Complete"
    assert reconciles > 4
    assert len(walks) == 1, f"{len(walks)} walks of the range in {reconciles} reconciles"


def test_the_webhook_does_not_count_again_an_update_that_keeps_request_and_schedule(
    walks: Walks,
) -> None:
    body = _cronjob("* * * * *", request("t", at(2), at(10)))
    assert webhook.validate_create(body) == []
    rules._remembered_times.cache_clear()
    relabelled = json.loads(json.dumps(body))
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert webhook.validate_update(relabelled, body) == []
    assert len(walks) == 1, "the unchanged request was counted again"
    rescheduled = _cronjob("*/2 * * * *", request("t", at(2), at(10)))
    assert webhook.validate_update(rescheduled, body) == []
    assert len(walks) == 2, "a new schedule must be counted"


def test_ten_copies_of_one_schedule_are_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = schedules.Schedule.times_after

    def counting(self: schedules.Schedule, t: datetime) -> Iterator[datetime]:
        calls.append(self.expression)
        return real(self, t)

    monkeypatch.setattr(schedules.Schedule, "times_after", counting)
    union = schedules.parse_schedules(["* * * * *"] * 9 + ["*/2 * * * *"], "America/New_York")
    times = list(schedules.times_between(union, at(0), at(1), limit=100))
    assert len(times) == 60
    assert sorted(calls) == ["* * * * *", "*/2 * * * *"]


@pytest.mark.parametrize(
    ("start", "end"),
    [
        (datetime(1969, 12, 31, 23, tzinfo=UTC), datetime(1970, 1, 1, 1, tzinfo=UTC)),
        (datetime(1900, 1, 1, tzinfo=UTC), datetime(1900, 1, 2, tzinfo=UTC)),
        (END_OF_JOB_TIMES - timedelta(hours=1), END_OF_JOB_TIMES + timedelta(hours=1)),
    ],
)
def test_a_range_a_job_name_cannot_carry_is_refused_with_the_field(
    start: datetime, end: datetime
) -> None:
    hourly = schedules.parse_schedule("0 * * * *")
    problem = rules.request_problem(request("t", start, end), hourly)
    assert problem is not None
    assert problem.startswith(f"{FIELD}: ")
    assert rfc3339(FIRST_JOB_TIME) in problem
    assert rfc3339(END_OF_JOB_TIMES) in problem
    assert f"0 to {JOB_TIME_DIGITS} digits" in problem
    (error,) = webhook.validate_create(_cronjob("0 * * * *", request("t", start, end)))
    assert str(error).startswith(f"{FIELD}: Invalid value:")
    assert "move the range" in str(error)


def test_the_edges_of_what_a_job_name_carries_are_accepted() -> None:
    hourly = schedules.parse_schedule("0 * * * *")
    first = request("t", FIRST_JOB_TIME, FIRST_JOB_TIME + timedelta(hours=2))
    assert rules.request_problem(first, hourly) is None
    last = request("t", END_OF_JOB_TIMES - timedelta(hours=2), END_OF_JOB_TIMES)
    assert rules.request_problem(last, hourly) is None
    (final,) = rules.times_of(hourly, rules.Request("t", *_range(last)))[-1:]
    assert len(job_name("x" * 52, final)) == 63


def _range(raw: str) -> tuple[datetime, datetime]:
    value = json.loads(raw)
    start, end = (datetime.fromisoformat(value[k].replace("Z", "+00:00")) for k in ("from", "to"))
    return start, end


def test_the_controller_reports_a_pre_1970_backfill_and_creates_nothing() -> None:
    world = a_world_a_day_in()
    before = created_order(world)
    ask(world, request("t1", datetime(1969, 12, 31, tzinfo=UTC), datetime(1970, 1, 2, tzinfo=UTC)))
    result = world.reconcile_once_at(at(24.25))
    assert created_order(world) == before
    degraded = world.condition("Degraded")
    assert degraded["reason"] == "InvalidBackfill"
    assert degraded["message"].startswith(f"{FIELD}: ")
    assert "InvalidBackfill" in world.recorder.reasons()
    assert not 0 < result.requeue_after <= 1, "no hot requeue"
    assert "backfill" not in world.status()


def test_an_oversized_annotation_is_refused_before_it_is_parsed() -> None:
    raw = json.dumps({"token": "t", "from": rfc3339(at(2)), "to": rfc3339(at(3)), "x": "y" * 2000})
    problem = rules.request_problem(raw, schedules.parse_schedule("0 * * * *"))
    assert problem is not None
    assert problem.startswith(f"{FIELD}: must be at most {rules.MAX_REQUEST_LENGTH} characters")


def _cronjob(schedule: str, raw: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {"name": "x", "namespace": NS, "annotations": {BACKFILL_ANNOTATION: raw}},
        "spec": {"schedule": schedule, "jobTemplate": {"spec": {}}},
    }
