"""The watch echo of our own status write is skipped, and nothing else (``StatusEchoes``,
and the CronJob controller's predicate over it, ``skip_status_echoes``).

The echo is the update from the object a reconcile decided from (its resourceVersion)
to that object with exactly the status the reconcile wrote; every other update passes
the predicate: a write retried after a Conflict (decided from an older object), a spec
or metadata edit, a resync, a relist that skips past the echo, another status, and the
echo of a write when another reconcile of the object started before it (that one may
have read the cache without the write), and the echo of a CronJob status write that
lets a Job go (deciding again from the written status prunes it).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.controllers.cronjob.reconciler import CronJobReconciler, skip_status_echoes
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.controller import Request
from cronjob_operator.runtime.controllerutil import StatusEchoes, write_status
from cronjob_operator.runtime.fake import DEFAULT_START, FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import CONFIG_MAP, Kind
from tests.unit import cronjob_harness


def stored(version: int, status: dict[str, Any], **spec: Any) -> objects.Obj:
    """The object as the cache holds it at ``version``."""
    metadata = {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": str(version)}
    return objects.freeze({"metadata": metadata, "spec": spec, "status": status})  # type: ignore[no-any-return]


class _Server:
    """A status client that stores what it is sent under the next resourceVersion; it
    answers the first ``conflicts`` writes with a Conflict (another writer got there)."""

    def __init__(self, current: objects.Obj, conflicts: int = 0) -> None:
        self.current = current
        self.conflicts = conflicts

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        if self.conflicts:
            self.conflicts -= 1
            self.current = stored(self.version + 1, objects.thaw(self.current["status"]))
            raise errors.Conflict({"reason": "Conflict"}, code=409)
        assert obj["metadata"]["resourceVersion"] == str(self.version)
        self.current = stored(self.version + 1, objects.thaw(obj["status"]))
        return objects.thaw(self.current)  # type: ignore[no-any-return]

    @property
    def version(self) -> int:
        return int(self.current["metadata"]["resourceVersion"])

    @property
    def live(self) -> Any:
        return self  # the fresh read after a Conflict: ``get``

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        return self.current


WRITTEN = {"active": [{"name": "j"}], "lastScheduleTime": "2026-12-06T00:00:00Z"}


def test_the_echo_of_our_write_is_skipped_once() -> None:
    # Failed before (no StatusEchoes): the echo was reconciled again, one reconcile in
    # three at a burst of due runs, each changing nothing.
    base = stored(7, {"active": []})
    server, echoes = _Server(base), StatusEchoes()
    assert write_status(server, CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    update = skip_status_echoes(echoes).update
    assert not update(base, server.current)
    assert update(base, server.current), "a second delivery of the same update passes"


def test_an_echo_seen_before_the_write_returns_is_skipped() -> None:
    # The watch may deliver the echo before the PUT's response: the note comes first.
    base, echoes = stored(7, {"active": []}), StatusEchoes()
    seen: list[bool] = []

    class _EchoFirst(_Server):
        def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
            seen.append(echoes.is_echo(base, stored(8, objects.thaw(obj["status"]))))
            return super().update_status(kind, obj)

    assert write_status(_EchoFirst(base), CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    assert seen == [True]


def test_a_write_retried_after_a_conflict_is_reconciled() -> None:
    base = stored(7, {"active": []})
    server, echoes = _Server(base, conflicts=1), StatusEchoes()
    assert write_status(server, CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    merged_onto = stored(8, {"active": []})
    assert skip_status_echoes(echoes).update(merged_onto, server.current)
    assert skip_status_echoes(echoes).update(
        base, stored(9, objects.thaw(server.current["status"]))
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (stored(7, {"active": []}), stored(8, {"active": []}, suspend=True)),  # a spec edit
        (stored(7, {"active": []}), stored(7, {"active": []})),  # a resync
        (stored(8, {"active": []}), stored(9, WRITTEN)),  # from another object than ours
        (stored(7, {"active": []}), stored(8, {**WRITTEN, "active": []})),  # another status
    ],
    ids=["spec-edit", "resync", "relist-past-the-base", "another-status"],
)
def test_every_other_update_passes(old: objects.Obj, new: objects.Obj) -> None:
    base = stored(7, {"active": []})
    echoes = StatusEchoes()
    assert write_status(_Server(base), CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    assert skip_status_echoes(echoes).update(old, new)


@pytest.mark.parametrize(
    "edited",
    [
        stored(9, WRITTEN, suspend=True),  # a spec edit after our write
        objects.freeze(
            {
                **stored(9, WRITTEN),
                "metadata": {**stored(9, WRITTEN)["metadata"], "labels": {"a": "b"}},
            }
        ),  # a label edit after our write
    ],
    ids=["spec-edit", "label-edit"],
)
def test_a_relist_past_the_echo_and_an_edit_passes(edited: objects.Obj) -> None:
    # A relist (after the watch expired) delivers one update from the cached object to
    # the newest: our write and a user's edit after it, in one. The edit is news.
    # Failed before: the status was the written one and the old resourceVersion the
    # base, so the update was taken for the echo and skipped.
    base = stored(7, {"active": []})
    echoes = StatusEchoes()
    assert write_status(_Server(base), CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    assert skip_status_echoes(echoes).update(base, edited)


def test_a_deleted_object_drops_its_note() -> None:
    base = stored(7, {"active": []})
    server, echoes = _Server(base), StatusEchoes()
    assert write_status(server, CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    predicate = skip_status_echoes(echoes)
    assert predicate.delete(server.current)
    assert predicate.update(base, server.current)


def test_the_predicate_runs_inline() -> None:
    assert skip_status_echoes(StatusEchoes()).inline


def test_an_echo_after_another_reconcile_started_is_reconciled() -> None:
    # A reconcile that starts after our write and before its echo may read the cache
    # without the write and decide from that stale copy: the echo must put it right.
    base = stored(7, {"active": []})
    server, echoes = _Server(base), StatusEchoes()
    assert write_status(server, CONFIG_MAP, base, dict(WRITTEN), echoes=echoes)
    client = FakeClientBuilder().with_kinds(CRONJOB).build()
    reconciler = CronJobReconciler(client, FakeRecorder())
    reconciler.echoes = echoes
    reconciler.reconcile(Request("ns", "a"))  # gone from this client: still forgets first
    assert skip_status_echoes(echoes).update(base, server.current)


def _every_five_minutes(**spec: Any) -> cronjob_harness.Harness:
    body = cronjob_harness.cronjob(
        "a", "ns", created=DEFAULT_START, spec={"schedule": "*/5 * * * *", **spec}
    )
    return cronjob_harness.Harness(body, start=DEFAULT_START, namespace="ns", name="a")


FIRST_RUN = DEFAULT_START + timedelta(minutes=5)


def test_the_echo_of_a_new_run_s_status_is_skipped() -> None:
    # The burst case the skip is for: the follow-up after a create writes active and
    # lastScheduleTime; deciding again from that status creates nothing and prunes nothing.
    world = _every_five_minutes()
    assert world.reconcile_once_at(FIRST_RUN).follow_up
    before = world.cronjob()
    world.reconcile_once_at(FIRST_RUN)
    assert world.cronjob()["metadata"]["resourceVersion"] != before["metadata"]["resourceVersion"]
    assert not skip_status_echoes(world.reconciler.echoes).update(before, world.cronjob())


def test_the_echo_of_a_write_that_lets_a_job_go_is_reconciled() -> None:
    # A failed Job is pruned only once the stored status has counted it
    # (history.prunable): the reconcile that counts it cannot prune it, a reconcile of
    # its write's echo does. Failed before: the echo was skipped, so the Job stayed until
    # some other event came (test_history_is_pruned_to_its_limits timed out in CI).
    world = _every_five_minutes(failedJobsHistoryLimit=0)
    world.reconcile_at(FIRST_RUN)
    job = job_name("a", FIRST_RUN)
    world.finish(job, "Failed", at=FIRST_RUN + timedelta(seconds=30))
    before = world.cronjob()
    world.reconcile_once_at(FIRST_RUN + timedelta(minutes=1))
    assert world.status()["consecutiveFailures"] == 1
    assert job in world.jobs(), "counted by this write, not pruned before it"
    assert skip_status_echoes(world.reconciler.echoes).update(before, world.cronjob())
    world.reconcile_once_at(FIRST_RUN + timedelta(minutes=1, seconds=1))  # the echo's
    assert job not in world.jobs()
