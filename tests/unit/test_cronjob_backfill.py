"""Backfill (issue 23 item 1): the reconciler on the fake client with an injected clock."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.api import cronjob_rules as rules
from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, MAX_BACKFILL
from cronjob_operator.controllers.cronjob import backfill
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.controllers.cronjob.status import Backfill
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.webhooks import cronjob as webhook
from tests.unit.cronjob_harness import Harness
from tests.unit.test_cronjob_policies import (
    NAME,
    NS,
    at,
    created_order,
    request_run,
    settle,
    world_of,
)

HOUR = timedelta(hours=1)


def request(token: str, start: datetime, end: datetime) -> str:
    return json.dumps({"token": token, "from": rfc3339(start), "to": rfc3339(end)})


def ask(world: Harness, raw: str | None) -> None:
    def change(body: dict[str, Any]) -> None:
        annotations = body["metadata"].setdefault("annotations", {})
        if raw is None:
            annotations.pop(BACKFILL_ANNOTATION, None)
        else:
            annotations[BACKFILL_ANNOTATION] = raw

    world.edit(change)


def progress(world: Harness) -> dict[str, Any]:
    return dict(world.status().get("backfill") or {})


def a_world_a_day_in(**spec: Any) -> Harness:
    """An hourly CronJob created at CREATED, reconciled a day later (its own run at 24:00)."""
    world = world_of(**spec)
    settle(world, at(24))
    return world


def test_a_backfill_runs_every_time_in_the_range_once_in_order() -> None:
    world = a_world_a_day_in()
    ask(world, request("t1", at(2), at(6)))
    settle(world, at(24.25))
    expected = [job_name(NAME, at(h)) for h in (2, 3, 4, 5)]
    assert created_order(world)[1:] == expected
    assert progress(world) == {
        "token": "t1",
        "from": rfc3339(at(2)),
        "to": rfc3339(at(6)),
        "requested": 4,
        "done": 4,
        "state": "Complete",
    }
    assert world.status()["lastScheduleTime"] == rfc3339(at(24)), "never moved backwards"
    reasons = world.recorder.reasons()
    assert reasons.count("BackfillStarted") == 1
    assert reasons.count("BackfillComplete") == 1
    world.edit(lambda body: body["metadata"].setdefault("labels", {}).update(touched="yes"))
    settle(world, at(24.5))
    assert created_order(world)[1:] == expected, "the same token again does nothing"
    assert max(world.runs().values()) == 1


def test_a_time_that_has_a_job_is_not_run_again() -> None:
    world = world_of()
    settle(world, at(1))
    settle(world, at(2))
    ask(world, request("t1", at(0.5), at(3)))
    settle(world, at(2.25))
    assert created_order(world) == [job_name(NAME, at(h)) for h in (1, 2)]
    assert progress(world)["done"] == 2
    assert progress(world)["requested"] == 2
    assert max(world.runs().values()) == 1


def test_forbid_runs_a_backfill_one_at_a_time_in_order() -> None:
    world = a_world_a_day_in(concurrencyPolicy="Forbid")
    world.finish(job_name(NAME, at(24)))
    ask(world, request("t1", at(2), at(5)))
    settle(world, at(24.25))
    assert created_order(world)[1:] == [job_name(NAME, at(2))]
    assert progress(world)["next"] == rfc3339(at(3))
    for hour in (2, 3):
        world.finish(job_name(NAME, at(hour)))
        settle(world, at(24.25))
    assert created_order(world)[1:] == [job_name(NAME, at(h)) for h in (2, 3, 4)]


def test_replace_runs_each_backfill_time_once_each_step_replacing_the_last() -> None:
    """Under Replace each step deletes the previous step's Job, whose run the stored
    progress has not counted yet (Jobs first): the follow-up must not run it again."""
    world = a_world_a_day_in(concurrencyPolicy="Replace")
    ask(world, request("t1", at(2), at(5)))
    settle(world, at(24.25))
    assert created_order(world)[1:] == [job_name(NAME, at(h)) for h in (2, 3, 4)]
    assert max(world.runs().values()) == 1
    assert progress(world)["state"] == "Complete"
    assert [ref["name"] for ref in world.status()["active"]] == [job_name(NAME, at(4))]


def test_replace_keeps_the_scheduled_run_that_replaced_a_backfill_step() -> None:
    """A backfill step and the scheduled run are due in the same reconcile: the scheduled
    run's create deletes the step's Job; the follow-up neither runs the step again nor
    deletes the scheduled run."""
    world = a_world_a_day_in(concurrencyPolicy="Replace")
    world.finish(job_name(NAME, at(24)))
    ask(world, request("t1", at(2), at(3)))
    world.reconcile_once_at(at(25))  # the 02:00 step, then the 25:00 run replacing it
    settle(world, at(25) + timedelta(seconds=1))
    assert created_order(world)[1:] == [job_name(NAME, at(2)), job_name(NAME, at(25))]
    assert max(world.runs().values()) == 1
    assert progress(world)["state"] == "Complete"
    assert [ref["name"] for ref in world.status()["active"]] == [job_name(NAME, at(25))]


def test_replace_counts_a_backfill_step_a_run_request_deleted() -> None:
    """A run request's create deletes the step the stored progress has not counted yet;
    the backfill goes on from the next time (the request's Job gives way to it, Replace)
    instead of running the deleted step again."""
    world = a_world_a_day_in(concurrencyPolicy="Replace")
    ask(world, request("t1", at(2), at(4)))
    world.reconcile_once_at(at(24.25))  # the 02:00 step; its follow-up waits
    request_run(world, "r1")
    settle(world, at(24.25) + timedelta(seconds=1))
    manual = rules.manual_job_name(NAME, "r1")
    assert created_order(world)[1:] == [job_name(NAME, at(2)), manual, job_name(NAME, at(3))]
    assert max(world.runs().values()) == 1
    assert progress(world)["state"] == "Complete"
    assert world.status()["lastHandledRunRequest"] == "r1"


def test_a_restart_in_the_middle_continues_where_the_jobs_say() -> None:
    world = a_world_a_day_in(concurrencyPolicy="Forbid")
    world.finish(job_name(NAME, at(24)))
    ask(world, request("t1", at(2), at(4)))
    world.reconcile_once_at(at(24.25))  # the 02:00 Job, its status not written yet
    world.restart()
    world.finish(job_name(NAME, at(2)))
    settle(world, at(24.25))
    world.finish(job_name(NAME, at(3)))
    settle(world, at(24.25))
    assert created_order(world)[1:] == [job_name(NAME, at(h)) for h in (2, 3)]
    assert progress(world)["state"] == "Complete"
    assert world.recorder.reasons().count("BackfillStarted") == 1


def test_removing_the_annotation_cancels_and_a_new_token_starts_again() -> None:
    world = a_world_a_day_in(concurrencyPolicy="Forbid")
    ask(world, request("t1", at(2), at(5)))
    settle(world, at(24.25))  # the 24:00 run is active: the backfill waits
    assert created_order(world)[1:] == []
    ask(world, None)
    settle(world, at(24.25))
    assert progress(world)["state"] == "Cancelled"
    assert "next" not in progress(world)
    assert "BackfillCancelled" in world.recorder.reasons()
    world.finish(job_name(NAME, at(24)))
    ask(world, request("t2", at(3), at(4)))
    settle(world, at(24.5))
    assert created_order(world)[1:] == [job_name(NAME, at(3))]
    assert progress(world)["token"] == "t2"


def test_a_running_backfill_keeps_its_jobs_from_pruning() -> None:
    """02:00 ran before the backfill; the backfill waits for 01:00 while the history limit
    would prune 02:00's Job: pruned, the backfill would run 02:00 a second time."""
    world = world_of(concurrencyPolicy="Forbid", successfulJobsHistoryLimit=1)
    settle(world, at(2))
    world.finish(job_name(NAME, at(2)), at=at(2.1))
    settle(world, at(24))  # 24:00 runs (and stays active)
    ask(world, request("t1", at(1), at(3)))
    settle(world, at(24.1))  # the backfill waits for 24:00 (Forbid)
    world.finish(job_name(NAME, at(24)), at=at(24.2))
    settle(world, at(24.25))  # two finished Jobs, a limit of 1; 01:00 starts
    assert job_name(NAME, at(2)) in world.jobs()
    world.finish(job_name(NAME, at(1)), at=at(24.3))
    settle(world, at(24.4))
    assert progress(world)["state"] == "Complete"
    assert world.runs()[job_name(NAME, at(2))] == 1


def test_more_than_the_bound_is_refused_naming_the_annotation() -> None:
    every_minute = schedules.parse_schedule("* * * * *")
    raw = request("t", at(0), at(0) + (MAX_BACKFILL + 1) * timedelta(minutes=1))
    problem = rules.request_problem(raw, every_minute)
    assert problem is not None
    assert problem.startswith(f"metadata.annotations[{BACKFILL_ANNOTATION}]: ")
    assert f"more than {MAX_BACKFILL} scheduled times" in problem
    world = a_world_a_day_in(schedule="* * * * *")
    ask(world, raw)
    settle(world, at(24.01))
    assert world.condition("Degraded")["reason"] == "InvalidBackfill"
    assert "backfill" not in world.status()


def test_the_webhook_refuses_a_bad_request_with_the_field() -> None:
    body = {
        "apiVersion": "batch.tutorial.kubebuilder.io/v1",
        "kind": "CronJob",
        "metadata": {
            "name": "x",
            "namespace": NS,
            "annotations": {BACKFILL_ANNOTATION: request("t", at(5), at(2))},
        },
        "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": {}}},
    }
    (error,) = webhook.validate_create(body)
    assert str(error).startswith(f"metadata.annotations[{BACKFILL_ANNOTATION}]: Invalid value:")
    assert "must be before to" in str(error)


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        ("not json", "must be JSON"),
        (json.dumps({"from": "2026-01-01T00:00:00Z", "to": "2026-01-02T00:00:00Z"}), "token"),
        (json.dumps({"token": "t", "from": "yesterday", "to": "2026-01-02T00:00:00Z"}), "RFC 3339"),
        (
            json.dumps({"token": "t", "from": "2026-01-01T00:00:00", "to": "2026-01-02T00:00:00Z"}),
            "RFC 3339",
        ),
    ],
)
def test_a_malformed_request_says_what_is_wrong(raw: str, detail: str) -> None:
    parsed = rules.parse_request(raw)
    assert isinstance(parsed, str)
    assert detail in parsed


def test_the_range_is_half_open() -> None:
    hourly = schedules.parse_schedule("0 * * * *")
    times = rules.times_of(hourly, rules.Request("t", at(2), at(4)))
    assert times == (at(2), at(3))
    assert times[0].tzinfo is UTC or times[0].utcoffset() == timedelta(0)


def test_the_progress_rules_return_new_progress_and_keep_the_recorded_one() -> None:
    times = (at(1), at(2), at(3))
    recorded: Backfill = {
        "token": "t",
        "requested": 3,
        "done": 0,
        "next": at(1),
        "state": "Running",
    }
    kept = dict(recorded)
    moved = backfill.advanced(recorded, times, {at(1), at(2)})
    assert moved == {**recorded, "done": 2, "next": at(3)}
    done = backfill.advanced(moved, times, set(times))
    assert done == {"token": "t", "requested": 3, "done": 3, "state": "Complete"}
    assert backfill.cancelled(moved) == {
        "token": "t",
        "requested": 3,
        "done": 2,
        "state": "Cancelled",
    }
    assert recorded == kept
    assert moved["next"] == at(3)
