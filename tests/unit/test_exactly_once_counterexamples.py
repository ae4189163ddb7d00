"""The counterexamples the exactly-once stories found, each as a story of its own.

``test_exactly_once_stories`` draws stories; when one breaks the rule
(docs/cronjob-semantics.md, "The rule") its shrunk form is kept here, so the defect stays
found whatever Hypothesis draws next. Each test names what went wrong before its fix.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION
from cronjob_operator.runtime.controllerutil import rfc3339
from tests.unit import run_model
from tests.unit.story_world import StoryWorld

T0 = datetime(2026, 3, 28, 22, 17, tzinfo=UTC)
EVERY_5 = {"schedule": "*/5 * * * *", "successfulJobsHistoryLimit": 0, "failedJobsHistoryLimit": 0}


def world(**spec: Any) -> StoryWorld:
    return StoryWorld({"c0": {**EVERY_5, **spec}}, start=T0, group_limit=1)


def backfill(story: StoryWorld, token: str, *, ago: int, minutes: int = 5) -> None:
    start = story.clock() - timedelta(minutes=ago)
    value = {
        "token": token,
        "from": rfc3339(start),
        "to": rfc3339(start + timedelta(minutes=minutes)),
    }
    story.annotate("c0", BACKFILL_ANNOTATION, json.dumps(value))


def assert_each_run_once(story: StoryWorld) -> None:
    assert not run_model.started_twice(story.ledger.starts, story.ledger.lost)
    assert not run_model.limit_breaches(story.ledger.starts)
    assert not run_model.rerun_by_backfill(story.ledger.starts, story.ledger.backfill_began)


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
