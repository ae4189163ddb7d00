"""The counterexamples the exactly-once stories found, each as a story of its own.

``test_exactly_once_stories`` draws stories; when one breaks the rule
(docs/cronjob-semantics.md, "The rule") its shrunk form is kept here, so the defect stays
found whatever Hypothesis draws next. Each test names what went wrong before its fix.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, RUN_ANNOTATION
from cronjob_operator.runtime.controllerutil import rfc3339
from tests.unit import run_model
from tests.unit import test_exactly_once_stories as stories
from tests.unit.story_world import StoryWorld

T0 = datetime(2026, 3, 28, 22, 17, tzinfo=UTC)
EVERY_5 = {"schedule": "*/5 * * * *", "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0}


def world(**spec: Any) -> StoryWorld:
    return grouped(c0=spec)


def grouped(**specs: dict[str, Any]) -> StoryWorld:
    """CronJobs named by keyword, each every five minutes with no history unless its spec
    says otherwise, sharing group ``g`` of limit 1 where they name it."""
    return StoryWorld(
        {name: {**EVERY_5, **spec} for name, spec in specs.items()}, start=T0, group_limit=1
    )


def backfill(story: StoryWorld, token: str, *, ago: int, minutes: int = 5) -> None:
    start = story.clock() - timedelta(minutes=ago)
    value = {
        "token": token,
        "from": rfc3339(start),
        "to": rfc3339(start + timedelta(minutes=minutes)),
    }
    story.annotate("c0", BACKFILL_ANNOTATION, json.dumps(value))


def assert_settled(story: StoryWorld) -> None:
    """c0's due times add up to its started, skipped and pending ones (rule 2)."""
    found = run_model.unsettled(
        story.spec("c0"),
        story.created,
        story.status("c0"),
        [run for run in story.ledger.starts if run.cron_job == "c0"],
        lost=story.ledger.lost,
    )
    assert found is None, found


def assert_each_run_once(story: StoryWorld) -> None:
    assert not run_model.started_twice(story.ledger.starts, story.ledger.lost)
    assert not run_model.limit_breaches(story.ledger.starts, story.ledger.lost)
    assert not run_model.rerun_by_backfill(
        story.ledger.starts, story.ledger.backfill_began, story.ledger.lost
    )


def test_a_backfill_re_ranged_under_its_token_keeps_the_recorded_range() -> None:
    """The same token with a new range does nothing (docs/beyond-builtin.md, 10). Before:
    the decision walked the annotation's new range while ``status.backfill`` kept the
    old one, so under Replace the next step deleted the old step's Job, which status
    did not count, and the time ran again."""
    story = world(concurrencyPolicy="Replace")
    backfill(story, "b0", ago=70)
    story.lag()
    backfill(story, "b0", ago=10)
    story.reconcile("c0")
    story.reconcile("c0")
    story.settle()
    story.later(timedelta(minutes=1))
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774732200"]  # 21:10 only
    assert story.status("c0")["backfill"]["state"] == "Complete"
    assert_each_run_once(story)


def test_replace_with_catch_up_all_keeps_the_run_limit() -> None:
    """maxScheduledRuns 2, Replace, catchUpPolicy All, five missed times. Before: each
    catch-up step's Replace deleted the previous step's Job, which no stored status had
    counted, so the count saw only the last one and all five ran."""
    story = world(maxScheduledRuns=2, concurrencyPolicy="Replace", catchUpPolicy="All")
    story.later(timedelta(minutes=28))
    for _ in range(3):
        story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774736400", "c0-1774736700"]
    assert story.status("c0")["scheduledRuns"]["count"] == 2
    assert_each_run_once(story)


def test_replace_never_deletes_a_job_a_running_backfill_has_still_to_count() -> None:
    """The 22:20 run is active when a backfill of [22:05, 22:25) starts under Replace.
    Before: the 22:05 step's Replace deleted the 22:20 Job, so when the backfill reached
    22:20 no Job showed that it ran, and it ran again. Now the step waits for it."""
    story = world(concurrencyPolicy="Replace")
    story.later(timedelta(minutes=3))
    story.settle()
    story.later(timedelta(minutes=1))
    backfill(story, "b0", ago=16, minutes=20)
    for _ in range(4):
        story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774736400"]
    story.finish("c0-1774736400", "Complete")
    for _ in range(6):
        story.settle()
    created = [run.job for run in story.ledger.starts]
    assert created.count("c0-1774736400") == 1
    assert story.status("c0")["backfill"]["state"] == "Complete"
    assert_each_run_once(story)


def test_replace_hands_its_group_slot_to_the_run_replacing_it() -> None:
    """Every minute, Replace, a group of 1 with whenFull Skip; the 22:18 run started 20 s
    late. Before: the 22:19 run's Replace deleted the 22:18 Job, whose slot was still in
    its claim grace, so the group was full: the old run was gone and the new one counted
    GroupFull. Now the new run takes the replaced Job's slot."""
    story = grouped(
        c0={
            "schedule": "*/1 * * * *",
            "concurrencyPolicy": "Replace",
            "concurrencyGroup": {"name": "g", "whenFull": "Skip"},
        }
    )
    story.later(timedelta(seconds=80))
    story.settle()
    story.later(timedelta(seconds=45))
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774736280", "c0-1774736340"]
    assert "groupFull" not in (story.status("c0").get("skippedRuns") or {})
    assert_each_run_once(story)


def test_a_buffered_run_that_finds_its_group_full_under_skip_is_counted_once_and_never_run() -> (
    None
):
    """BufferOne keeps 22:25 while 22:20 runs; when 22:20 ends, another CronJob holds the
    group's one slot, and whenFull is Skip. Before: every reconcile counted 22:25 as
    GroupFull again (2 after two), and once the slot freed it ran all the same."""
    story = grouped(
        c0={
            "concurrencyPolicy": "BufferOne",
            "concurrencyGroup": {"name": "g", "whenFull": "Skip"},
        },
        c1={"schedule": "0 0 1 1 *", "concurrencyGroup": {"name": "g"}},
    )
    story.later(timedelta(minutes=3))
    story.settle()
    story.later(timedelta(minutes=5))
    story.settle()
    assert story.status("c0")["bufferedRun"] == "2026-03-28T22:25:00Z"
    story.finish("c0-1774736400", "Complete")
    story.annotate("c1", RUN_ANNOTATION, "x")
    story.reconcile("c1")
    story.reconcile("c1")
    story.later(timedelta(seconds=30))
    for _ in range(2):
        story.reconcile("c0")
    assert story.status("c0")["skippedRuns"]["groupFull"] == 1
    [c1_job] = [run.job for run in story.ledger.starts if run.cron_job == "c1"]
    story.finish(c1_job, "Complete")
    story.later(timedelta(seconds=30))
    story.settle()
    assert [run.job for run in story.ledger.starts if run.cron_job == "c0"] == ["c0-1774736400"]
    assert story.status("c0")["skippedRuns"]["groupFull"] == 1
    assert_each_run_once(story)


def test_replace_never_deletes_a_run_requests_job_while_its_status_write_fails() -> None:
    """A run request and the scheduled run are due at once under Replace, and every
    status write fails for a while. Before: each retry deleted the request's Job to make
    room for the scheduled run and wrote nothing, so the next retry ran the request
    again and deleted the scheduled run: 5 and 4 Jobs in 6 reconciles. Now the request's
    Job waits for the write that records it."""
    story = world(concurrencyPolicy="Replace")
    story.settle()
    story.later(timedelta(minutes=3))
    story.annotate("c0", RUN_ANNOTATION, "t0")
    for _ in range(6):
        story.fail_next("status", 500)
        story.reconcile("c0")
    assert [run.job for run in story.ledger.starts] == ["c0-mkexsnlndy"]
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-mkexsnlndy", "c0-1774736400"]
    assert story.status("c0")["lastHandledRunRequest"] == "t0"
    assert_each_run_once(story)


def test_a_time_a_backfill_runs_is_not_also_counted_skipped() -> None:
    """An hour passes; a backfill of [23:07, 23:12) is requested. Before: its 23:10 step
    was created, then the same reconcile's skip accounting counted 23:10 CatchUpBound
    (it looked only at the Jobs the cache listed): one time both run and skipped."""
    story = world()
    story.later(timedelta(seconds=3599))
    backfill(story, "b0", ago=10)
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774739400", "c0-1774739700"]
    assert story.status("c0")["skippedRuns"]["catchUpBound"] == 10  # 22:20 to 23:05
    assert_settled(story)
    assert_each_run_once(story)


def test_a_cache_lagging_behind_two_of_our_writes_does_not_run_a_time_again() -> None:
    """The cache lags from before the 22:20 run; the follow-up decides from our own first
    write (the cache still holds the copy it was decided from) and writes again. Before:
    that second write was remembered by the written copy's version, which the cache never
    held, so the next reconcile decided from the lagging copy, found neither the run nor
    its Job (deleted by someone else after status recorded it) and ran 22:20 again."""
    story = world()
    story.lag()
    story.later(timedelta(minutes=5))
    story.reconcile("c0")
    story.reconcile("c0")
    backfill(story, "b0", ago=10)
    story.delete_job("c0-1774736400")
    assert not story.ledger.lost, "status recorded the run before the delete"
    story.reconcile("c0")
    assert [run.job for run in story.ledger.starts] == ["c0-1774736400"]
    assert_each_run_once(story)


def test_a_backfill_step_and_a_scheduled_run_in_one_reconcile_keep_the_run_limit() -> None:
    """maxScheduledRuns 1; a backfill of 22:10 and the 22:20 run are due in the same
    reconcile. Before: the limit's count saw only the Jobs the cache listed, not the
    backfill step this reconcile had just created, so 22:20 ran too: 2 of 1."""
    story = world(maxScheduledRuns=1)
    backfill(story, "b0", ago=10)
    story.later(timedelta(seconds=300))
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774735800"]
    assert story.status("c0")["scheduledRuns"] == {
        "count": 1,
        "remaining": 0,
        "countedThrough": "2026-03-28T22:10:00Z",
    }
    assert_each_run_once(story)


def test_a_run_whose_job_is_gone_is_not_counted_skipped_once_a_later_run_starts() -> None:
    """The 23:15 run is created and recorded (lastScheduleTime), then someone deletes its
    Job; at 23:21 the 23:20 run starts. Before: once lastScheduleTime moved to 23:20 no
    Job and no record showed that 23:15 ran, so the skip accounting counted it
    CatchUpBound as well."""
    story = world()
    story.later(timedelta(seconds=3599))
    story.reconcile("c0")
    story.delete_job("c0-1774739700")
    assert not story.ledger.lost
    story.later(timedelta(seconds=300))
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774739700", "c0-1774740000"]
    assert story.status("c0")["skippedRuns"]["catchUpBound"] == 11  # 22:20 to 23:10
    assert_settled(story)


def test_a_backfill_using_up_the_run_limit_leaves_the_times_already_skipped_skipped() -> None:
    """Suspended, maxScheduledRuns 1: an hour of times is counted skipped (suspended),
    then a backfill runs five of them. The backfill is not refused by the limit and uses
    it up, but the times counted before it stay counted: the limit ends the schedule in
    the order runs are created, so no time is both skipped and cut off by the limit, and
    none after the backfill is run or counted."""
    story = world(schedule="*/1 * * * *", suspend=True, maxScheduledRuns=1)
    story.later(timedelta(seconds=3599))
    story.settle()
    backfill(story, "b0", ago=10)
    story.settle()
    status = story.status("c0")
    assert status["scheduledRuns"]["remaining"] == 0
    # 23:16, the newest time, would still run if resumed now; the backfill's limit ends
    # the schedule before it is counted.
    assert status["skippedRuns"]["accountedThrough"] == "2026-03-28T23:15:00Z"
    assert status["skippedRuns"]["suspended"] == 58  # 22:18 to 23:15
    assert len(story.ledger.starts) == 5
    assert_settled(story)
    assert_each_run_once(story)


def test_times_counted_skipped_before_a_backfill_uses_up_the_run_limit_stay_counted() -> None:
    """Replace, maxScheduledRuns 2, every minute; five minutes pass, then a backfill of
    five minutes from before the creation. The first reconcile counts the times it
    cannot catch up (CatchUpBound) while the limit has room; the backfill's steps then
    use the limit up. Those skipped times stay skipped, and nothing later runs."""
    story = world(schedule="*/1 * * * *", concurrencyPolicy="Replace", maxScheduledRuns=2)
    story.later(timedelta(seconds=300))
    backfill(story, "b0", ago=10)
    for _ in range(3):
        story.settle()
        story.later(timedelta(minutes=1))
    story.settle()
    status = story.status("c0")
    assert status["scheduledRuns"]["remaining"] == 0
    assert_settled(story)
    assert_each_run_once(story)


def test_a_run_whose_job_is_deleted_unrecorded_twice_may_start_three_times() -> None:
    """The model was wrong here, not the controller: a backfill step's Job is deleted by
    someone else before status records it, twice; each delete takes the run's only
    evidence, so each time the controller may start it again (rule 3). The model's
    ledger kept the lost identities as a set and allowed one more start in all."""
    story = world(suspend=True)
    backfill(story, "b0", ago=10, minutes=30)
    story.fail_next("status", 500)  # the write that would list the step's Job active
    story.reconcile("c0")
    story.restart()
    story.delete_job("c0-1774735800")
    story.fail_next("status", 500)
    story.reconcile("c0")
    story.restart()
    story.delete_job("c0-1774735800")
    story.settle()
    assert len([run for run in story.ledger.starts if run.job == "c0-1774735800"]) == 3
    assert story.ledger.lost[("backfill", "c0", "b0", 1, "1774735800")] == 2
    assert_each_run_once(story)


def test_a_backfill_after_the_run_limit_is_used_up_does_not_move_the_schedules_end() -> None:
    """maxScheduledRuns 1, window from 22:40: an hour passes and 23:15 runs (the earlier
    times counted CatchUpBound), using the limit up; an hour later a backfill runs 00:10.
    Before: the backfill run was counted too and moved ``countedThrough``, where the
    schedule ends, to 00:10, so the skip accounting counted 23:20 to 00:05 CatchUpBound:
    ten times past the limit, which are no runs at all."""
    story = world(maxScheduledRuns=1, window={"start": "2026-03-28T22:40:00Z"})
    story.later(timedelta(seconds=3599))
    story.settle()
    story.later(timedelta(seconds=3599))
    backfill(story, "b0", ago=10)
    story.settle()
    status = story.status("c0")
    assert [run.job for run in story.ledger.starts] == ["c0-1774739700", "c0-1774743000"]
    assert status["skippedRuns"]["catchUpBound"] == 7  # 22:40 to 23:10
    assert status["scheduledRuns"]["countedThrough"] == "2026-03-28T23:15:00Z"
    assert_settled(story)
    assert_each_run_once(story)


def test_a_run_skipped_for_a_full_group_waits_for_the_skip_accounting_to_reach_it() -> None:
    """Every minute, whenFull Skip; another CronJob's run request holds the group's one
    slot; a day passes. The skip accounting walks 1,000 times a reconcile, so the newest
    time is tried while 440 older ones are still to walk. Before: counting it GroupFull
    moved the watermark to it, past those 440, which were never counted."""
    skip = {"name": "g", "whenFull": "Skip"}
    story = grouped(
        c0={"schedule": "*/1 * * * *", "concurrencyGroup": skip},
        c1={"suspend": True, "concurrencyGroup": skip},
    )
    story.annotate("c1", RUN_ANNOTATION, "t0")
    story.settle()
    story.later(timedelta(days=1))
    story.settle()
    skipped = story.status("c0")["skippedRuns"]
    assert (skipped["catchUpBound"], skipped["groupFull"]) == (1439, 1)
    assert_settled(story)
    assert_each_run_once(story)


def test_a_buffered_time_pending_when_a_backfill_uses_up_the_run_limit_is_no_run() -> None:
    """The model was wrong here, not the controller: BufferOne, maxScheduledRuns 1, window
    from 22:40; a backfill of 22:10 is requested, an hour passes and a run request comes,
    then the first reconcile: the request's Job makes 22:40 to 23:10 BufferFull and
    buffers 23:15, and the backfill's run uses the limit up. 23:15 was pending, not
    settled, when the limit was used up: it never starts and is no run. The model counted
    it due, as a time through the stored ``accountedThrough``."""
    spec = {
        "schedules": ["*/5 * * * *", "0 * * * *"],
        "concurrencyPolicy": "BufferOne",
        "maxScheduledRuns": 1,
        "window": {"start": "2026-03-28T22:40:00Z"},
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 0,
    }
    story = StoryWorld({"c0": spec}, start=T0, group_limit=1)
    backfill(story, "b0", ago=10)
    story.later(timedelta(seconds=3599))
    story.annotate("c0", RUN_ANNOTATION, "t0")
    story.reconcile("c0")
    story.finish(story.ledger.starts[0].job, "Complete")
    story.settle()
    status = story.status("c0")
    assert status["skippedRuns"]["bufferFull"] == 7  # 22:40 to 23:10
    assert "bufferedRun" not in status
    assert_settled(story)
    assert_each_run_once(story)


def test_a_run_whose_job_is_deleted_unrecorded_may_be_counted_skipped() -> None:
    """The model was wrong here, not the controller: the 23:15 run is created by a
    reconcile whose status write never comes, then someone deletes its Job. With its
    only evidence gone the controller cannot know it ran (rule 3), and under Latest the
    next reconcile counts it CatchUpBound with the other missed times. The model took the
    lost start for a start and found 23:15 both started and skipped."""
    story = world()
    story.reconcile("c0")
    story.later(timedelta(seconds=3599))
    story.reconcile("c0")
    story.delete_job("c0-1774739700")
    assert story.ledger.lost
    story.later(timedelta(seconds=3599))
    story.settle()
    assert story.status("c0")["skippedRuns"]["catchUpBound"] == 23  # 22:20 to 00:10, 23:15 too
    assert_settled(story)
    assert_each_run_once(story)


def test_catch_up_all_under_a_lagging_cache_counts_no_run_it_created() -> None:
    """Found on the real control plane (CI, under load), then here: catch-up All creates
    one missed time per reconcile and writes no status until the last (Jobs first), while
    the Job watch lags all four creates. Before: a created Job was taken into the view
    for one reconcile only, so the reconcile that wrote status saw only the newest and
    counted the three older times CatchUpBound as well as run. Now a created Job is
    expected until the cache shows it (``expectations.py``)."""
    story = world(catchUpPolicy="All", successfulJobsHistoryLimit=10)
    story.settle()
    story.later(timedelta(minutes=20))
    story.lag()
    for _ in range(6):
        story.reconcile("c0")
    assert [run.job for run in story.ledger.starts] == [
        "c0-1774736400",  # 22:20
        "c0-1774736700",
        "c0-1774737000",
        "c0-1774737300",  # 22:35
    ]
    assert "catchUpBound" not in story.status("c0")["skippedRuns"]
    story.settle()
    assert_settled(story)
    assert_each_run_once(story)


def test_an_expected_job_deleted_before_the_cache_showed_it_is_not_believed_for_ever() -> None:
    """A Job someone deletes before the watch brings it: the reconcile after the one that
    relied on it asks the API server, finds it gone and stops taking it into its view
    (under Forbid, the next time would wait on it for ever)."""
    story = world(concurrencyPolicy="Forbid", successfulJobsHistoryLimit=10)
    story.settle()
    story.later(timedelta(minutes=5))
    story.lag()
    story.reconcile("c0")  # creates 22:20 and writes no status (Jobs first)
    story.reconcile("c0")  # the follow-up: 22:20 is expected, recorded active
    story.delete_job("c0-1774736400")
    story.later(timedelta(minutes=5))
    story.reconcile("c0")  # asks the API server: gone; 22:25 starts
    assert [run.job for run in story.ledger.starts] == ["c0-1774736400", "c0-1774736700"]
    story.settle()
    assert_settled(story)
    assert_each_run_once(story)


def test_a_run_past_its_start_timeout_is_ended_and_its_time_never_runs_again() -> None:
    """The stories' Jobs start at once and their Pods never show, so a run past
    ``runStartTimeoutSeconds`` is ended (its Job deleted after status records it, rule
    3) and counted failed; under Forbid the next time then starts, and no time runs
    twice."""
    story = world(concurrencyPolicy="Forbid", runStartTimeoutSeconds=60)
    story.settle()
    story.later(timedelta(minutes=3))  # 22:20 is due
    story.settle()
    story.later(timedelta(minutes=5))  # 22:20 is past its timeout, 22:25 due
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774736400", "c0-1774736700"]
    assert [job["metadata"]["name"] for job in story.jobs()] == ["c0-1774736700"]
    assert story.status("c0")["consecutiveFailures"] == 1
    assert ("Warning", "RunStartTimeout") in {(e.type, e.reason) for e in story.recorder.events}
    assert_settled(story)
    assert_each_run_once(story)


def test_a_job_deleted_after_status_listed_it_active_is_a_run_not_a_lost_one() -> None:
    """The model was wrong here, not the controller (random stories, seed 8 of 2,000): a
    backfill's first step creates the Job of 23:07, which is also a scheduled time of
    this every-minute CronJob, and the new backfill's status write lists it in
    ``status.active``; someone then deletes it. The controller knows the run started (a
    Job missing from ``active``: MissingJob) and counts 23:07 run; the world took the
    deleted Job for a lost start, as the backfill's progress did not record it yet, and
    the model found 23:07 neither started nor skipped."""
    spec = {
        "schedule": "*/1 * * * *",
        "window": {"start": "2026-03-28T22:40:00Z", "end": "2026-11-01T08:00:00Z"},
        "concurrencyPolicy": "Forbid",
        "startingDeadlineSeconds": 30,
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 0,
        "concurrencyGroup": {"name": "g", "whenFull": "Wait"},
    }
    story = StoryWorld({"c0": spec}, start=T0, group_limit=1)
    story.later(timedelta(seconds=3599))  # 23:16:59
    backfill(story, "b0", ago=10)  # 23:07 to 23:11
    story.reconcile("c0")
    assert [ref["name"] for ref in story.status("c0")["active"]] == ["c0-1774739220"]  # 23:07
    story.delete_job("c0-1774739220")
    assert not story.ledger.lost
    story.settle()
    assert_settled(story)
    assert_each_run_once(story)


def test_a_backfill_step_whose_job_went_missing_from_active_is_done_not_run_again() -> None:
    """Found with the one above: the first step of a new backfill is listed in
    ``status.active`` by the write that announces the backfill, then someone deletes its
    Job while no memory of the create is left (a restart). Before: the step's progress
    counted only Jobs that exist, so the controller reported MissingJob and ran the
    step again, a recorded run started twice. Now a time whose Job went missing from
    ``active`` counts done (``runs.went_missing``)."""
    story = world(suspend=True)
    backfill(story, "b0", ago=10, minutes=30)
    story.reconcile("c0")
    assert [ref["name"] for ref in story.status("c0")["active"]] == ["c0-1774735800"]
    story.restart()
    story.delete_job("c0-1774735800")
    story.settle()
    assert [run.job for run in story.ledger.starts].count("c0-1774735800") == 1
    assert story.status("c0")["backfill"]["done"] >= 1
    assert_each_run_once(story)


def test_a_run_whose_job_someone_deleted_is_counted_run_while_the_controller_remembers() -> None:
    """The model was wrong here (random stories, seeds 16, 17 and 21 of 2,000): the
    reconcile that creates the Job of 23:00 writes no status (Jobs first), and someone
    deletes that Job before the follow-up. The controller still expects the Job it
    created, so it counts 23:00 run (``lastScheduleTime``), which is true; the model
    wanted such a time counted skipped or started again, as after a restart."""
    story = world(schedule="0 * * * *")
    story.reconcile("c0")
    story.later(timedelta(seconds=3599))  # 23:16:59
    story.reconcile("c0")
    story.delete_job("c0-1774738800")  # 23:00
    assert story.ledger.lost
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774738800"]
    status = story.status("c0")
    assert status["lastScheduleTime"] == "2026-03-28T23:00:00Z"
    assert set(status["skippedRuns"]) == {"accountedThrough"}
    assert_settled(story)


def test_a_create_that_timed_out_is_asked_for_before_forbid_starts_another_run() -> None:
    """Random stories, seed 11 of 2,000: the create of run request t0's Job times out
    after the API server stored it, while the cache lags; the next reconcile sees the
    newer request t1 and no Job. Before: the create's outcome was forgotten, so Forbid
    let t1's Job start beside t0's. Now a create with no clear answer is expected until
    a live read says whether the Job exists (``CreatedJobs.maybe_created``)."""
    story = world(concurrencyPolicy="Forbid", suspend=True)
    story.annotate("c0", RUN_ANNOTATION, "t0")
    story.lag()
    story.annotate("c0", RUN_ANNOTATION, "t1")
    story.fail_next("create-timeout", 0)
    story.reconcile("c0")
    story.reconcile("c0")
    assert [run.identity[2] for run in story.ledger.starts] == ["t0"]
    assert_each_run_once(story)
    story.settle()
    assert_each_run_once(story)


def test_a_run_past_its_start_timeout_is_ended_only_once_status_records_it() -> None:
    """Random stories, seed 19 of 2,000: run request t0's Job is created, the status
    write that records the request is refused, and the Job passes its start timeout
    before any write records it. Before: the timeout deleted the Job, the only evidence
    of the run, and the status write that would have recorded the request was refused
    again, so the request ran again. Now the reconcile writes the status that records
    the run first and its follow-up ends it (rule 3, as Replace does)."""
    story = world(suspend=True, runStartTimeoutSeconds=60)
    story.annotate("c0", RUN_ANNOTATION, "t0")
    story.fail_next("status", 500)
    story.reconcile("c0")
    assert "lastHandledRunRequest" not in story.status("c0")
    story.later(timedelta(seconds=61))
    story.fail_next("status", 500)
    story.reconcile("c0")
    story.settle()
    assert [run.identity[2] for run in story.ledger.starts] == ["t0"]
    assert story.jobs() == []
    assert story.status("c0")["lastHandledRunRequest"] == "t0"
    assert story.status("c0")["consecutiveFailures"] == 1
    assert_each_run_once(story)


def test_a_scheduled_run_lost_to_someone_elses_delete_does_not_use_up_the_run_limit() -> None:
    """The model was wrong here (random stories, seed 23 of 2,000): the create of 22:18
    times out after the API server stored the Job, and someone deletes that Job before
    any status records it. The controller cannot know 22:18 ran, so 22:19 is the first
    run of ``maxScheduledRuns: 1``; the model counted the lost run toward the limit and
    found a second run past it, and, at quiescence, the limit used up at 22:18."""
    story = world(schedule="*/1 * * * *", maxScheduledRuns=1)
    story.later(timedelta(seconds=61))  # 22:18:01
    story.fail_next("create-timeout", 0)
    story.reconcile("c0")
    story.delete_job("c0-1774736280")  # 22:18
    assert story.ledger.lost
    story.later(timedelta(seconds=59))  # 22:19
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774736280", "c0-1774736340"]
    assert story.status("c0")["scheduledRuns"]["remaining"] == 0
    assert_each_run_once(story)
    story.later(timedelta(minutes=30))
    story.restart()
    story.settle()
    assert_settled(story)


def test_a_waiting_run_that_moves_to_a_newer_time_and_uses_up_the_run_limit() -> None:
    """The model was wrong here (random stories, seed 14 of 2,000): c0 waits for the
    group's one slot with 22:21 (``waitingForGroup``); when the slot frees at 22:22 its
    waiting run moves to the newest due time, counts 22:21 skipped and starts 22:22,
    which uses up ``maxScheduledRuns``. The model took 22:21, pending when that run was
    created, for a time the limit left unrun, as after a backfill run, and found it
    counted twice."""
    group = {"name": "g", "whenFull": "Wait"}
    story = grouped(
        c0={"schedule": "*/1 * * * *", "maxScheduledRuns": 1, "concurrencyGroup": group},
        c1={"concurrencyGroup": group},
    )
    story.later(timedelta(minutes=3))  # 22:20
    story.reconcile("c1")
    story.reconcile("c1")
    story.later(timedelta(minutes=1))  # 22:21
    story.settle()
    assert story.status("c0")["waitingForGroup"]["scheduledTime"] == "2026-03-28T22:21:00Z"
    story.later(timedelta(minutes=1))  # 22:22
    story.finish("c1-1774736400", "Complete")
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c1-1774736400", "c0-1774736520"]
    assert story.status("c0")["scheduledRuns"]["remaining"] == 0
    assert_settled(story)
    assert_each_run_once(story)


def test_a_backfill_run_whose_count_was_never_written_uses_up_the_run_limit_first() -> None:
    """``maxScheduledRuns: 1``. Backfill b0 creates the Job of 22:10 and its status write
    is refused; the annotation then takes the same token with a later range, and the
    next reconcile, which cannot know the first range, runs 23:10 as b0's step. The
    22:10 run used the limit up when it was created, so the count stands at 1 and the
    schedule ends at 22:10 (docs/beyond-builtin.md, 11). Random stories, seed 61 of
    2,000. Before: ``count_runs`` counted every uncounted run's time at once, so it
    counted both (``count: 2`` of a limit of 1), ended the schedule at 23:10 and counted
    22:20 to 23:05, times past the limit, skipped. Now uncounted runs beyond the room
    left count in the order they were created."""
    story = world(maxScheduledRuns=1)
    story.later(timedelta(seconds=3599))  # 23:16:59
    story.fail_next("status", 500)
    backfill(story, "b0", ago=70)  # 22:06:59 to 22:11:59: 22:10
    story.reconcile("c0")
    backfill(story, "b0", ago=10)  # 23:06:59 to 23:11:59: 23:10
    story.settle()
    assert [run.job for run in story.ledger.starts] == ["c0-1774735800", "c0-1774739400"]
    assert story.status("c0")["scheduledRuns"]["count"] == 1
    assert_settled(story)


def test_a_policy_edited_to_allow_under_a_lagging_cache_is_no_breach_of_forbid() -> None:
    """The story world was wrong here (random stories, seed 61 of 2,000, after the fix
    above): a Forbid CronJob is edited to Allow while the cache lags. The reconciler
    decides from the object its own status write returned, which carries the edit, and
    starts a backfill step beside the scheduled run, as Allow lets it; the world judged
    the create by the cache's spec (Forbid) and called it a breach. A policy in flux is
    now judged by the more permissive of the cache's and the API's."""
    spec = {**EVERY_5, "concurrencyPolicy": "Forbid", "runStartTimeoutSeconds": 60}
    story = StoryWorld({"c0": spec}, start=T0, group_limit=1)
    story.annotate("c0", RUN_ANNOTATION, "t0")
    story.lag()
    story.reconcile("c0")
    story.reconcile("c0")
    story.later(timedelta(seconds=3599))  # 23:16:59: t0's Job is past its start timeout
    story.edit("c0", concurrencyPolicy="Allow")
    backfill(story, "b0", ago=10)  # 23:06:59 to 23:11:59: 23:10
    story.reconcile("c0")
    story.reconcile("c0")
    assert [run.job for run in story.ledger.starts] == [
        "c0-mkexsnlndy",
        "c0-1774739700",  # 23:15
        "c0-1774739400",  # 23:10, the backfill step, beside it
    ]
    beside = story.ledger.starts[-1]
    assert (beside.policy, beside.others_unfinished) == ("Allow", ("c0-1774739700",))
    assert_each_run_once(story)


def test_a_backfill_step_that_takes_a_buffered_time_is_that_times_run() -> None:
    """The model was wrong here (random stories, seed 96 of 2,000): under BufferOne a run
    request runs, the scheduled 23:00 waits in ``bufferedRun`` (settled as pending), and a
    backfill of 23:00 waits too. When the request's Job ends, the backfill step starts
    first and creates 23:00's Job; the buffered time then has its Job, so the controller
    counts it started and does not run it again (one Job per time). The model counted a
    backfill Job of a time settled before its create as a run of its own, so 23:00 was
    neither started, skipped nor pending. A time pending at the create is not settled:
    the backfill's Job is that time's run (docs/cronjob-semantics.md, "The rule", 2).
    This is Hypothesis's failing case, replayed step by step."""
    state = stories.Stories()
    state.begin(
        cronjobs=[
            {
                "schedule": "0 * * * *",
                "window": {"start": "2026-03-28T22:40:00Z", "end": "2026-11-01T08:00:00Z"},
                "concurrencyPolicy": "BufferOne",
                "catchUpPolicy": "Latest",
                "suspend": False,
                "successfulJobsHistoryLimit": 0,
                "failedJobsHistoryLimit": 0,
            }
        ],
        start=datetime(2026, 3, 28, 22, 17, tzinfo=UTC),
        group_limit=1,
    )
    state.backfill_requested(ago=10, index=0, minutes=120, token="b0")
    state.time_passes(seconds=3599)
    state.run_requested(index=0, token="t0")
    state.the_cluster_settles()
    state.someone_deletes_a_job(pick=0)
    state.the_cluster_settles()
    state.no_backfill_reran_a_time()
    state.no_run_started_twice()
    state.the_limits_held_at_every_create()
    state.teardown()
