"""The built-in's ``batch.kubernetes.io/cronjob-scheduled-timestamp`` on every Job a
scheduled time makes (due, caught up, backfilled), none on a run request's (issue 37 item 4).

The built-in (``getJobFromTemplate2``) writes ``scheduledTime.In(zone).Format(time.RFC3339)``
with the zone of ``spec.timeZone``, UTC when unset; ``kubectl create job --from=cronjob``
writes none. The reconciler runs on the fake client with an injected clock.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import manual_job_name
from cronjob_operator.api.run_overrides import RunRequest
from cronjob_operator.controllers.cronjob.jobs import (
    SCHEDULED_TIMESTAMP_ANNOTATION,
    build_job,
    build_manual_job,
    builtin_timestamp,
    job_name,
)
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import rfc3339
from tests.unit import cronjob_harness
from tests.unit.test_cronjob_policies import NAME, at, settle, world_of


@pytest.mark.parametrize(
    ("moment", "zone", "expected"),
    [
        (datetime(2016, 5, 19, 10, 0, tzinfo=UTC), "UTC", "2016-05-19T10:00:00Z"),
        (datetime(2016, 5, 19, 10, 0, tzinfo=UTC), "Europe/Berlin", "2016-05-19T12:00:00+02:00"),
        # A zero offset is "Z" in any zone, as Go's Z07:00 writes it.
        (datetime(2016, 1, 19, 10, 0, tzinfo=UTC), "Europe/London", "2016-01-19T10:00:00Z"),
        (datetime(2016, 1, 19, 10, 0, tzinfo=UTC), "Asia/Kolkata", "2016-01-19T15:30:00+05:30"),
        (datetime(2016, 1, 19, 10, 0, tzinfo=UTC), "America/St_Johns", "2016-01-19T06:30:00-03:30"),
        # Whole seconds only: a sub-second scheduled time is cut, never rounded.
        (datetime(2016, 1, 19, 10, 0, 5, 900000, tzinfo=UTC), "UTC", "2016-01-19T10:00:05Z"),
    ],
)
def test_the_timestamp_is_gos_rfc3339_in_the_zone(
    moment: datetime, zone: str, expected: str
) -> None:
    assert builtin_timestamp(moment.astimezone(ZoneInfo(zone))) == expected


@pytest.mark.parametrize(("sign", "expected"), [(1, "+01:19"), (-1, "-01:19")])
def test_an_offsets_seconds_are_dropped_as_go_does(sign: int, expected: str) -> None:
    # Local mean times (Amsterdam's until 1937 was +00:19:32) have such offsets.
    zone = timezone(sign * timedelta(hours=1, minutes=19, seconds=32))
    wall = datetime(2016, 1, 19, 10, 0, tzinfo=zone)
    assert builtin_timestamp(wall) == f"2016-01-19T10:00:00{expected}"


def template_cronjob(**spec: Any) -> objects.Obj:
    body = cronjob_harness.cronjob(
        "hello", "ns", created=at(0), spec={"schedule": "0 * * * *", **spec}
    )
    body["metadata"]["uid"] = "cj-uid"
    body["spec"]["jobTemplate"]["metadata"] = {
        "annotations": {"note": "y", SCHEDULED_TIMESTAMP_ANNOTATION: "forged"}
    }
    body["spec"]["jobTemplate"]["spec"]["template"]["metadata"] = {"annotations": {"pod": "z"}}
    return objects.freeze(body)


def test_a_scheduled_job_and_its_pods_carry_the_time_over_the_templates_value() -> None:
    built = build_job(template_cronjob(), at(10), ZoneInfo("Europe/Berlin"))
    assert built["metadata"]["annotations"]["note"] == "y"
    assert built["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION] == (
        "2016-05-19T12:00:00+02:00"
    )
    # On the pod template too: the Downward API reads only the Pod's own annotations.
    assert built["spec"]["template"]["metadata"]["annotations"] == {
        "pod": "z",
        SCHEDULED_TIMESTAMP_ANNOTATION: "2016-05-19T12:00:00+02:00",
    }


def test_a_job_template_without_pod_metadata_gets_some() -> None:
    body = cronjob_harness.cronjob("hello", "ns", created=at(0), spec={"schedule": "0 * * * *"})
    body["metadata"]["uid"] = "cj-uid"
    built = build_job(objects.freeze(body), at(10), ZoneInfo("UTC"))
    assert built["spec"]["template"]["metadata"] == {
        "annotations": {SCHEDULED_TIMESTAMP_ANNOTATION: "2016-05-19T10:00:00Z"}
    }


def test_a_run_requests_job_has_no_scheduled_time_as_kubectl_create_job_from() -> None:
    built = build_manual_job(template_cronjob(), RunRequest("token-1"))
    # The template's annotations are copied as they are (kubectl copies them too).
    assert built["metadata"]["annotations"][SCHEDULED_TIMESTAMP_ANNOTATION] == "forged"
    assert built["spec"]["template"]["metadata"]["annotations"] == {"pod": "z"}


def stamps(world: cronjob_harness.Harness) -> dict[str, str]:
    return {
        name: job["metadata"]["annotations"].get(SCHEDULED_TIMESTAMP_ANNOTATION)
        for name, job in world.jobs().items()
    }


def test_every_caught_up_run_carries_its_own_time_in_the_cronjobs_zone() -> None:
    world = world_of(catchUpPolicy="All", timeZone="Asia/Kolkata")
    settle(world, at(3.5))
    # Hourly in Kolkata (+05:30) runs at hh:00 there, hh:30 UTC: 00:30 to 03:30 UTC.
    assert stamps(world) == {
        job_name(NAME, at(h + 0.5)): f"2016-05-19T0{h + 6}:00:00+05:30" for h in range(4)
    }


def test_a_due_run_without_a_time_zone_is_stamped_in_utc() -> None:
    world = world_of()
    settle(world, at(1.5))
    assert stamps(world) == {job_name(NAME, at(1)): "2016-05-19T01:00:00Z"}


def test_backfilled_runs_carry_their_scheduled_times_and_a_run_request_none() -> None:
    world = world_of(timeZone="America/St_Johns")  # -02:30 in May: runs at hh:30 UTC
    settle(world, at(24))
    backfill = {"token": "b1", "from": rfc3339(at(2)), "to": rfc3339(at(4))}
    world.edit(
        lambda body: (
            body["metadata"]
            .setdefault("annotations", {})
            .update({BACKFILL_ANNOTATION: json.dumps(backfill), RUN_ANNOTATION: "now-1"})
        )
    )
    settle(world, at(24.25))
    found = stamps(world)
    assert found[job_name(NAME, at(2.5))] == "2016-05-19T00:00:00-02:30"
    assert found[job_name(NAME, at(3.5))] == "2016-05-19T01:00:00-02:30"
    assert found[manual_job_name(NAME, "now-1")] is None
