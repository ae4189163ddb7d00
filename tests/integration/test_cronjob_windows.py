"""Run window, run limit and exclusions (issue 40 item 2) on the local control plane.

The controller runs with a fake clock that a test moves, then kicks the CronJob, as in
test_cronjob_policies; Jobs run under kwok. Status, conditions and ``kubectl cjt next``
are read back as a user would; the CRD's schema and CEL rules refuse bad values.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import rfc3339
from tests.integration import test_cronjob_policies as policies
from tests.integration.support import RunningManager, apply, refused_by_rule
from tests.integration.test_cronjob_controller import (
    World,
    created_at,
    cronjob_object,
    run_at,
    tick_after,
)
from tests.integration.test_cronjob_features import kubectl_cjt
from tests.integration.test_cronjob_policies import job_of, manager, scheduled_jobs

# The fixtures (the CRDs, a fake clock, the manager on it, the World) are the policies
# tests': this module drives the same manager the same way.
crds, clock, operator, world = policies.crds, policies.clock, policies.operator, policies.world


def reason_of(world: World, name: str, type_: str) -> str | None:
    return (world.condition(name, type_) or {}).get("reason")


def test_only_times_in_the_window_run_and_an_excluded_one_is_counted(
    operator: RunningManager, clock: FakeClock, world: World
) -> None:
    # Created now; its window opens at the second */5 time and closes at the fifth, and
    # the third is excluded (a cron time in UTC): only the second and fourth run.
    placeholder = cronjob_object("win", world.ns)
    apply(world.cp, placeholder)
    ticks = [tick_after(created_at(world, "win"), n) for n in range(6)]
    excluded = ticks[3]
    body = cronjob_object(
        "win",
        world.ns,
        window={"start": rfc3339(ticks[2]), "end": rfc3339(ticks[5])},
        exclusions={"schedules": [f"{excluded.minute} {excluded.hour} * * *"]},
    )
    apply(world.cp, body)
    wait_for(
        lambda: world.status("win").get("nextScheduleTime") == rfc3339(ticks[2]),
        30,
        message="nextScheduleTime is the window's first time",
    )
    shown = kubectl_cjt(world, "next", "win", "-n", world.ns, "--from", rfc3339(ticks[0]))
    assert shown.returncode == 0, shown.stderr
    assert [line.split()[0] for line in shown.stdout.splitlines()] == [
        ticks[2].isoformat(),
        ticks[4].isoformat(),
    ], "the excluded time and the times outside the window are not shown"

    run_at(operator, clock, world, "win", ticks[1])
    operator.kick_and_wait("cronjob", world.ns, "win")
    assert scheduled_jobs(world, "win") == [], "before the window"
    first = run_at(operator, clock, world, "win", ticks[2])
    wait_for(lambda: first in world.jobs(), 30, message=f"job {first}")
    run_at(operator, clock, world, "win", ticks[3])
    wait_for(
        lambda: (world.status("win").get("skippedRuns") or {}).get("excluded") == 1,
        30,
        message="the excluded time counted",
        detail=lambda: str(world.status("win")),
    )
    second = run_at(operator, clock, world, "win", ticks[4])
    wait_for(lambda: second in world.jobs(), 30, message=f"job {second}")
    assert world.status("win")["skippedRuns"]["excluded"] == 1
    run_at(operator, clock, world, "win", ticks[5])
    wait_for(
        lambda: reason_of(world, "win", "Available") == "WindowEnded",
        30,
        message="the window's end stops scheduling",
    )
    assert scheduled_jobs(world, "win") == [job_of("win", ticks[2]), job_of("win", ticks[4])]
    assert "nextScheduleTime" not in world.status("win")
    assert "RunsSkipped" in world.event_reasons("win")


def test_the_run_limit_counts_each_run_once_across_a_restart_and_then_stops(
    control_plane: ControlPlane, clock: FakeClock, world: World
) -> None:
    with manager(control_plane, clock) as operator:
        apply(world.cp, cronjob_object("lim", world.ns, maxScheduledRuns=2))
        wait_for(lambda: world.status("lim").get("scheduledRuns"), 30, message="first count")
        assert world.status("lim")["scheduledRuns"] == {"count": 0, "remaining": 2}
        ticks = [tick_after(created_at(world, "lim"), n) for n in (1, 2, 3)]
        first = run_at(operator, clock, world, "lim", ticks[0])
        wait_for(lambda: first in world.jobs(), 30, message=f"job {first}")
    # A restart (a leader change) right after the create: the new manager counts it once.
    with manager(control_plane, clock) as operator:
        operator.kick("cronjob", world.ns, "lim")
        wait_for(
            lambda: (world.status("lim").get("scheduledRuns") or {}).get("count") == 1,
            30,
            message="the first run counted",
        )
        second = run_at(operator, clock, world, "lim", ticks[1])
        wait_for(
            lambda: reason_of(world, "lim", "Available") == "RunLimitReached",
            30,
            message="the limit is reached",
        )
        assert world.status("lim")["scheduledRuns"] == {
            "count": 2,
            "countedThrough": rfc3339(ticks[1]),
            "remaining": 0,
        }
        run_at(operator, clock, world, "lim", ticks[2])
        operator.kick_and_wait("cronjob", world.ns, "lim")
        assert scheduled_jobs(world, "lim") == [first, second]
        assert "nextScheduleTime" not in world.status("lim")
        shown = kubectl_cjt(world, "next", "lim", "-n", world.ns)
        assert (shown.returncode, shown.stdout) == (0, ""), shown.stderr


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        (
            {"window": {"start": "2026-01-02T00:00:00Z", "end": "2026-01-01T00:00:00Z"}},
            "spec.window",
            "window: start must be before end",
        ),
        (
            {"exclusions": {"schedules": ["@every 1h"]}},
            "spec.exclusions.schedules",
            "exclusions.schedules: @reboot and @every are not supported (they are no times); "
            "exclude cron times such as '* * 25 12 *'",
        ),
    ],
)
def test_the_schema_refuses_a_bad_window_by_field(
    world: World, spec: dict[str, Any], field: str, message: str
) -> None:
    refused = world.cp.kubectl(
        "apply", "-f", "-", input=json.dumps(cronjob_object("bad", world.ns, **spec))
    )
    assert refused.returncode != 0
    assert refused_by_rule(refused.stderr, field, message), refused.stderr


def test_the_schema_refuses_a_date_that_is_no_date_and_a_zero_limit(world: World) -> None:
    body = cronjob_object("bad", world.ns, maxScheduledRuns=0, exclusions={"dates": ["25.12.2026"]})
    refused = world.cp.kubectl("apply", "-f", "-", input=json.dumps(body))
    assert refused.returncode != 0
    assert "spec.maxScheduledRuns: Invalid value: 0" in refused.stderr, refused.stderr
    assert 'spec.exclusions.dates[0]: Invalid value: "25.12.2026"' in refused.stderr
