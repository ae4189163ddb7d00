"""Catch-up, BufferOne and skipped-run accounting (issue 23 items 2, 3 and 5).

The reconciler on the runtime's fake client (``cronjob_harness``) with an injected clock:
an outage is a jump of the clock, a restart is a new reconciler on the same API, a
finishing run is the Job controller's status write. Every count is checked in status
(which survives restarts) and in the counter of the reconciler that wrote it.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator import schedule as schedules
from cronjob_operator.api.batch_v1 import (
    CRONJOB,
    MAX_CATCH_UP,
    RUN_ANNOTATION,
    CatchUpPolicy,
    ConcurrencyPolicy,
    SkipReason,
    settings_of,
)
from cronjob_operator.controllers.cronjob import concurrency, policies
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.controllers.cronjob.status import JobReference, SkippedRuns
from cronjob_operator.controllers.cronjob.view import api_status
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness

NS, NAME = "default", "report"
CREATED = datetime(2016, 5, 19, 0, 0, tzinfo=UTC)
HOUR, MINUTE = timedelta(hours=1), timedelta(minutes=1)
SKIPPED = "cronjob_operator_runs_skipped_total"


def at(hours: float) -> datetime:
    return CREATED + timedelta(hours=hours)


def world_of(**spec: Any) -> Harness:
    """A CronJob created at CREATED: hourly, unless ``spec`` says schedule or schedules."""
    default = {} if "schedules" in spec else {"schedule": "0 * * * *"}
    body = cronjob_harness.cronjob(NAME, NS, created=CREATED, spec={**default, **spec})
    return Harness(body, start=CREATED, namespace=NS, name=NAME)


def settle(world: Harness, moment: datetime, *, limit: int = 500) -> int:
    """Reconcile at ``moment`` until it asks for nothing sooner than a second (the
    follow-ups and prompt requeues of a catch-up); returns how many reconciles ran."""
    for count in range(1, limit + 1):
        result = world.reconcile_once_at(moment)
        if not result.follow_up and not 0 < result.requeue_after <= 1:
            return count
    raise AssertionError(f"still catching up after {limit} reconciles")


def request_run(world: Harness, token: str) -> None:
    """Ask for a manual run: the run request annotation with ``token``."""
    world.edit(
        lambda body: body["metadata"].setdefault("annotations", {}).update({RUN_ANNOTATION: token})
    )


def created_order(world: Harness) -> list[str]:
    return [write.name for write in world.client.writes_of("create", JOB)]


def skipped(world: Harness) -> dict[str, Any]:
    return dict(world.status().get("skippedRuns") or {})


def counts(world: Harness) -> Counter[str]:
    found = skipped(world)
    return Counter({r.value: found[r.status_key] for r in SkipReason if found.get(r.status_key)})


def counter(world: Harness, reason: SkipReason) -> float:
    return world.sample(SKIPPED, namespace=NS, cronjob=NAME, reason=reason.value) or 0.0


# --- catch-up ---------------------------------------------------------------------------


def test_latest_runs_the_newest_missed_time_and_counts_the_others() -> None:
    world = world_of()
    settle(world, at(3.5))  # down since creation: 01:00, 02:00 and 03:00 missed
    assert created_order(world) == [job_name(NAME, at(3))]
    assert counts(world) == {"CatchUpBound": 2}
    assert counter(world, SkipReason.CATCH_UP_BOUND) == 2
    assert skipped(world)["accountedThrough"] == rfc3339(at(3))
    (event,) = [e for e in world.recorder.events if e.reason == "RunsSkipped"]
    assert event.type == "Warning"
    assert "2 scheduled run(s) skipped (2 CatchUpBound)" in event.message


def test_all_runs_every_missed_time_oldest_first_each_once() -> None:
    world = world_of(catchUpPolicy="All")
    settle(world, at(3.5))
    expected = [job_name(NAME, at(h)) for h in (1, 2, 3)]
    assert created_order(world) == expected
    assert world.status()["lastScheduleTime"] == rfc3339(at(3))
    assert counts(world) == {}
    world.restart()
    settle(world, at(3.75))
    assert created_order(world) == expected, "a restart runs nothing again"
    assert max(world.runs().values()) == 1


def test_all_survives_a_restart_in_the_middle_of_the_catch_up() -> None:
    world = world_of(catchUpPolicy="All")
    world.reconcile_once_at(at(3.5))  # 01:00 created; the status write is the follow-up's
    world.restart()
    settle(world, at(3.5))
    assert created_order(world) == [job_name(NAME, at(h)) for h in (1, 2, 3)]
    assert max(world.runs().values()) == 1


def test_all_honours_the_deadline_and_counts_what_it_leaves_out() -> None:
    world = world_of(catchUpPolicy="All", startingDeadlineSeconds=int(2 * HOUR.total_seconds()))
    settle(world, at(4.5))  # 01:00 and 02:00 are out of reach (at or before 02:30)
    assert created_order(world) == [job_name(NAME, at(h)) for h in (3, 4)]
    assert counts(world) == {"DeadlinePassed": 2}


def test_all_is_bounded_and_counts_the_rest() -> None:
    world = world_of(schedule="* * * * *", catchUpPolicy="All")
    settle(world, at(2))  # 120 missed minutes
    names = created_order(world)
    assert len(names) == MAX_CATCH_UP
    assert names[0] == job_name(NAME, at(2) - (MAX_CATCH_UP - 1) * MINUTE)
    assert names[-1] == job_name(NAME, at(2))
    assert names == sorted(names)
    assert counts(world) == {"CatchUpBound": 120 - MAX_CATCH_UP}


def test_all_never_runs_a_time_before_a_schedule_edit() -> None:
    world = world_of(schedule="0 0 1 1 *", catchUpPolicy="All")
    settle(world, at(0.5))
    world.clock.set(at(3.5))
    world.edit(lambda body: body["spec"].update(schedule="0 * * * *"))
    settle(world, at(3.5))
    settle(world, at(4.25))
    assert created_order(world) == [job_name(NAME, at(4))], "01:00-03:00 came before the edit"
    assert counts(world) == {}


def test_all_under_forbid_runs_one_at_a_time_in_order_without_a_hot_loop() -> None:
    world = world_of(catchUpPolicy="All", concurrencyPolicy="Forbid")
    settle(world, at(3.5))  # 01:00 starts; 02:00 and 03:00 wait for it
    assert created_order(world) == [job_name(NAME, at(1))]
    result = world.reconcile_once_at(at(3.5))
    assert result.requeue_after > 60, "no prompt requeue while the active run blocks"
    for hour in (1, 2):
        world.finish(job_name(NAME, at(hour)))
        settle(world, at(3.5))
    assert created_order(world) == [job_name(NAME, at(h)) for h in (1, 2, 3)]
    assert counts(world) == {}


def test_all_does_not_warn_too_many_missed_times() -> None:
    world = world_of(schedule="* * * * *", catchUpPolicy="All")
    settle(world, at(2))
    assert "TooManyMissedTimes" not in world.recorder.reasons()


# --- skipped-run accounting ---------------------------------------------------------


def test_forbid_counts_a_time_it_skips_once_across_reconciles_and_restarts() -> None:
    world = world_of(concurrencyPolicy="Forbid")
    settle(world, at(1))  # 01:00 runs and stays active
    settle(world, at(2))  # 02:00 waits for it (it may still run late, as the built-in's)
    assert counts(world) == {}
    settle(world, at(3))  # 03:00: 02:00 can no longer run
    assert counts(world) == {"ForbidWhileActive": 1}
    world.restart()
    settle(world, at(3.25))
    settle(world, at(3.5))
    assert counts(world) == {"ForbidWhileActive": 1}, "counted once, restarts included"
    assert counter(world, SkipReason.FORBID_WHILE_ACTIVE) == 0, "the new process counted none"
    world.finish(job_name(NAME, at(1)))
    settle(world, at(3.5))  # 03:00 runs late, as the built-in's Forbid does
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(3))]
    assert counts(world) == {"ForbidWhileActive": 1}


def test_suspended_times_are_counted_and_the_newest_still_runs_on_resume() -> None:
    world = world_of(suspend=True)
    for hour in (1, 2, 3):
        settle(world, at(hour))
    world.clock.set(at(3.5))
    world.edit(lambda body: body["spec"].update(suspend=False))
    settle(world, at(3.5))
    assert created_order(world) == [job_name(NAME, at(3))]
    assert counts(world) == {"Suspended": 2}


def test_paused_times_are_counted_as_paused() -> None:
    world = world_of(failurePolicy={"pauseAfterConsecutiveFailures": 1})
    settle(world, at(1))
    world.finish(job_name(NAME, at(1)), "Failed")
    settle(world, at(1.25))
    assert world.condition("Available")["reason"] == "PausedAfterFailures"
    settle(world, at(2))
    settle(world, at(3))
    assert counts(world) == {"PausedAfterFailures": 1}  # 03:00 may still run on resume


def test_a_deadline_that_passes_is_counted() -> None:
    world = world_of(startingDeadlineSeconds=60)
    settle(world, at(1) + 2 * MINUTE)
    assert created_order(world) == []
    assert counts(world) == {"DeadlinePassed": 1}


def test_a_long_outage_is_accounted_in_bounded_steps_each_time_once() -> None:
    world = world_of(schedule="* * * * *")
    reconciles = settle(world, at(50))  # 3,000 minutes
    assert reconciles > 3000 // policies.ACCOUNT_STEP  # walked in steps, not at once
    assert counts(world) == {"CatchUpBound": 3000 - 1}
    assert counter(world, SkipReason.CATCH_UP_BOUND) == 3000 - 1


def test_a_reconcile_between_two_times_walks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    world = world_of()
    settle(world, at(1))
    walks = 0
    walk = schedules.times_between

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal walks
        walks += 1
        return walk(*args, **kwargs)

    monkeypatch.setattr(schedules, "times_between", counting)
    settle(world, at(1.5))
    assert walks == 0
    settle(world, at(2))
    # The reconcile that creates 02:00's Job decides once (the create is performed when
    # the decision comes to it: controllers/cronjob/plan.py), and its follow-up once.
    assert walks == 2


def test_an_upgraded_cronjob_counts_nothing_from_before_the_accounting() -> None:
    world = world_of()
    settle(world, at(1))
    world.edit_status(lambda status: status.pop("skippedRuns"))  # as an older operator left it
    settle(world, at(2))
    assert counts(world) == {}
    assert skipped(world)["accountedThrough"] == rfc3339(at(2))


def test_a_failed_create_keeps_no_counts_and_the_retry_reports_them_once() -> None:
    world = world_of()
    failures = [errors.api_error(500, {"reason": "InternalError", "message": "etcd is sad"})]
    world.client.prepend_reactor("create", JOB, lambda _: failures.pop() if failures else None)
    with pytest.raises(errors.ApiError):
        world.reconcile_once_at(at(3.5))
    assert counts(world) == {}, "the failed reconcile wrote its other status, not the skips"
    settle(world, at(3.5))
    assert counts(world) == {"CatchUpBound": 2}
    assert counter(world, SkipReason.CATCH_UP_BOUND) == 2
    assert world.recorder.reasons().count("RunsSkipped") == 1


def test_the_counter_series_go_with_the_cronjob() -> None:
    world = world_of()
    settle(world, at(3.5))
    assert counter(world, SkipReason.CATCH_UP_BOUND) == 2
    world.client.delete(CRONJOB, NAME, namespace=NS)
    world.reconcile_at(at(3.75))
    assert world.sample(SKIPPED, namespace=NS, cronjob=NAME, reason="CatchUpBound") is None


# --- BufferOne ----------------------------------------------------------------------


def test_buffer_one_starts_the_waiting_time_when_the_run_finishes() -> None:
    world = world_of(concurrencyPolicy="BufferOne")
    settle(world, at(1))
    settle(world, at(2))  # 01:00 active: 02:00 waits
    assert world.status()["bufferedRun"] == rfc3339(at(2))
    assert "RunBuffered" in world.recorder.reasons()
    settle(world, at(3))  # one waits already: 03:00 is skipped
    assert counts(world) == {"BufferFull": 1}
    world.restart()  # the buffer is in status
    world.finish(job_name(NAME, at(1)), at=at(3.5))
    settle(world, at(3.5))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(2))]
    assert "bufferedRun" not in world.status()
    assert world.status()["lastScheduleTime"] == rfc3339(at(2))
    settle(world, at(3.75))
    assert created_order(world) == [job_name(NAME, at(1)), job_name(NAME, at(2))]
    assert counts(world) == {"BufferFull": 1}
    assert max(world.runs().values()) == 1


def test_buffer_one_runs_at_once_when_nothing_is_active() -> None:
    world = world_of(concurrencyPolicy="BufferOne")
    settle(world, at(1))
    world.finish(job_name(NAME, at(1)))
    settle(world, at(2))
    assert created_order(world) == [job_name(NAME, at(h)) for h in (1, 2)]
    assert "bufferedRun" not in world.status()


def test_a_buffered_time_past_its_deadline_is_dropped_and_counted() -> None:
    world = world_of(concurrencyPolicy="BufferOne", startingDeadlineSeconds=600)
    settle(world, at(1))
    settle(world, at(2))
    assert world.status()["bufferedRun"] == rfc3339(at(2))
    world.finish(job_name(NAME, at(1)), at=at(2.5))
    settle(world, at(2.5))  # 02:00 + 10 minutes passed
    assert created_order(world) == [job_name(NAME, at(1))]
    assert "bufferedRun" not in world.status()
    assert counts(world) == {"DeadlinePassed": 1}
    assert counter(world, SkipReason.DEADLINE_PASSED) == 1


def test_a_dropped_buffered_time_is_counted_even_when_the_next_create_fails() -> None:
    world = world_of(concurrencyPolicy="BufferOne", startingDeadlineSeconds=600)
    settle(world, at(1))
    settle(world, at(2))  # 02:00 waits
    world.finish(job_name(NAME, at(1)), at=at(2.9))
    failures = [errors.api_error(500, {"reason": "InternalError", "message": "etcd is sad"})]
    world.client.prepend_reactor("create", JOB, lambda _: failures.pop() if failures else None)
    with pytest.raises(errors.ApiError):
        world.reconcile_once_at(at(3.05))  # 02:00 expired; creating 03:00 fails
    settle(world, at(3.05))
    assert counts(world) == {"DeadlinePassed": 1}
    assert created_order(world)[-1] == job_name(NAME, at(3))


def test_buffer_one_waits_for_a_manual_run_too() -> None:
    world = world_of(concurrencyPolicy="BufferOne")
    settle(world, at(1))
    request_run(world, "now")
    settle(world, at(1.25))
    assert world.status().get("pendingRunRequest") == "now"


# --- pure rules ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "reason"),
    [
        ({"suspended": True, "paused": True}, SkipReason.SUSPENDED),
        ({"suspended": False, "paused": True}, SkipReason.PAUSED_AFTER_FAILURES),
        ({"suspended": False, "paused": False}, None),
    ],
)
def test_the_most_fundamental_block_names_the_skip(
    flags: dict[str, bool], reason: SkipReason | None
) -> None:
    block = policies.blocked_by(policy=ConcurrencyPolicy.ALLOW, active_since=at(1), **flags)
    assert (block and block.reason) == reason


def test_forbid_and_buffer_one_block_only_the_times_after_the_active_run() -> None:
    for policy, reason in (
        (ConcurrencyPolicy.FORBID, SkipReason.FORBID_WHILE_ACTIVE),
        (ConcurrencyPolicy.BUFFER_ONE, SkipReason.BUFFER_FULL),
    ):
        block = policies.blocked_by(
            suspended=False, paused=False, active_since=at(2), policy=policy
        )
        assert block is not None
        assert block.reason == reason
        assert block.applies(at(3))
        assert not block.applies(at(1))
        assert (
            policies.blocked_by(suspended=False, paused=False, active_since=None, policy=policy)
            is None
        )


def test_after_an_outage_the_older_times_are_catch_up_not_the_active_runs_fault() -> None:
    """The run Latest starts for 03:00 is active in the follow-up that counts 01:00 and
    02:00: they were skipped by the catch-up policy, not by Forbid or BufferOne."""
    for policy in ("Forbid", "BufferOne"):
        world = world_of(concurrencyPolicy=policy)
        settle(world, at(0.5))  # seen once before the outage: the run's status is its follow-up's
        settle(world, at(3.5))
        assert created_order(world) == [job_name(NAME, at(3))]
        assert counts(world) == {"CatchUpBound": 2}, policy


def account_hourly(
    skipped_runs: SkippedRuns | None,
    *,
    now: datetime,
    ran: set[datetime],
    pending: set[datetime],
) -> policies.Accounting:
    """The accounting walk of an hourly schedule from at(0) to ``now``, no deadline."""
    return policies.account(
        skipped_runs,
        schedules.parse_schedule("0 * * * *"),
        initial=at(0),
        floor=at(0),
        now=now,
        latest=now,
        reach=None,
        ran=ran,
        pending=pending,
        block=None,
    )


def test_the_walk_never_passes_a_time_that_may_still_run() -> None:
    accounting = account_hourly(None, now=at(5), ran={at(1)}, pending={at(3), at(4)})
    assert accounting.skipped_runs is not None
    assert api_status(accounting.skipped_runs) == {
        "accountedThrough": rfc3339(at(2)),
        "catchUpBound": 1,
    }
    assert accounting.skipped == {SkipReason.CATCH_UP_BOUND: 1}
    assert not accounting.more


@pytest.mark.parametrize("value", [None, "Latest", "Sometimes"])
def test_anything_but_all_catches_up_latest(value: str | None) -> None:
    assert settings_of({"catchUpPolicy": value}).catch_up_policy is CatchUpPolicy.LATEST


# --- several schedules ----------------------------------------------------------------


def test_several_schedules_run_the_union_and_a_shared_time_once() -> None:
    world = world_of(schedules=["0 * * * *", "0 */2 * * *", "30 1 * * *"])
    for moment in (at(1), at(1.5), at(2), at(3)):
        settle(world, moment)
    assert created_order(world) == [job_name(NAME, at(h)) for h in (1, 1.5, 2, 3)]
    status = world.status()
    assert status["nextScheduleTime"] == rfc3339(at(4))
    assert status["observedSchedule"]["schedules"] == "0 * * * *; 0 */2 * * *; 30 1 * * *"
    assert "schedule" not in status["observedSchedule"]


def test_catch_up_all_and_skip_accounting_work_over_the_union() -> None:
    world = world_of(schedules=["0 */2 * * *", "30 * * * *"], catchUpPolicy="All")
    settle(world, at(2.75))
    expected = [at(h) for h in (0.5, 1.5, 2, 2.5)]
    assert created_order(world) == [job_name(NAME, t) for t in expected]
    world.edit(lambda body: body["spec"].pop("catchUpPolicy"))
    settle(world, at(5))  # 03:30, 04:00, 04:30 missed: Latest runs 04:30
    assert created_order(world)[-1] == job_name(NAME, at(4.5))
    assert counts(world) == {"CatchUpBound": 2}


def test_editing_the_schedules_never_runs_a_time_before_the_edit() -> None:
    world = world_of(schedules=["0 0 1 1 *"])
    settle(world, at(0.5))
    world.clock.set(at(3.5))
    world.edit(lambda body: body["spec"].update(schedules=["0 0 1 1 *", "0 * * * *"]))
    settle(world, at(3.5))
    assert created_order(world) == []
    settle(world, at(4))
    assert created_order(world) == [job_name(NAME, at(4))]


def test_a_stored_bad_entry_is_reported_by_its_index() -> None:
    world = world_of(schedules=["0 * * * *", "61 * * * *"])
    settle(world, at(1))
    degraded = world.condition("Degraded")
    assert degraded["reason"] == "UnparseableSchedule"
    assert degraded["message"].startswith('spec.schedules[1]: "61 * * * *": ')
    assert created_order(world) == []


# --- the rules return what they decide ------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "active", "room"),
    [
        (ConcurrencyPolicy.ALLOW, 1, concurrency.Room(wait=False)),
        (ConcurrencyPolicy.FORBID, 1, concurrency.Room(wait=True)),
        (ConcurrencyPolicy.FORBID, 0, concurrency.Room(wait=False)),
        (ConcurrencyPolicy.BUFFER_ONE, 1, concurrency.Room(wait=True)),
        (
            ConcurrencyPolicy.REPLACE,
            2,
            concurrency.Room(wait=False, replace=({"name": "a0"}, {"name": "a1"})),
        ),
    ],
)
def test_room_for_a_run_says_wait_or_which_jobs_replace_deletes(
    policy: ConcurrencyPolicy, active: int, room: concurrency.Room
) -> None:
    refs: list[JobReference] = [{"name": f"a{index}"} for index in range(active)]
    assert concurrency.room_for(policy, refs) == room
    assert len(refs) == active, "the caller deletes and records"


def test_buffer_one_decides_the_buffered_time_and_leaves_recording_to_the_caller() -> None:
    def buffer(buffered: datetime | None, **given: Any) -> concurrency.Buffering:
        situation: dict[str, Any] = {
            "running": False,
            "queue": (at(2),),
            "ran": set(),
            "reach": None,
            "holding": False,
        }
        situation.update(given)
        return concurrency.buffer(ConcurrencyPolicy.BUFFER_ONE, buffered, **situation)

    came_due = buffer(None, running=True)
    assert came_due == concurrency.Buffering(None, (), at(2), newly_buffered=True)
    assert buffer(at(1), running=True) == concurrency.Buffering(None, (), at(1))
    assert buffer(at(1)) == concurrency.Buffering(at(1), (at(2),), at(1))
    assert buffer(at(1), reach=at(1)) == concurrency.Buffering(at(2), (at(2),), None, dropped=at(1))
    started = concurrency.buffer(
        ConcurrencyPolicy.ALLOW,
        at(1),
        running=False,
        queue=(),
        ran={at(1)},
        reach=None,
        holding=False,
    )
    assert started == concurrency.Buffering(None, (), None), "its Job exists: not kept"


def test_the_accounting_returns_the_skipped_runs_it_leaves_and_keeps_its_input() -> None:
    stored: SkippedRuns = {"accountedThrough": at(0), "catchUpBound": 2}
    accounting = account_hourly(stored, now=at(2), ran=set(), pending=set())
    assert stored == {"accountedThrough": at(0), "catchUpBound": 2}
    assert accounting.skipped_runs == {"accountedThrough": at(2), "catchUpBound": 4}
    assert policies.skip_counted(stored, SkipReason.DEADLINE_PASSED) == {
        **stored,
        "deadlinePassed": 1,
    }
    assert "deadlinePassed" not in stored
