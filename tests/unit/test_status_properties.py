"""Property tests: status computed from any set of Jobs is exactly what the Jobs say.

Hypothesis draws a world: Jobs of every state (running, complete, failed, with noise
conditions such as ``Complete=False``), some of them in the cache, a stored
``status.active`` that may point at finished Jobs, Jobs the cache lacks, Jobs that are
gone, and even the same Job twice (a status written by an older or broken writer), and
a stored ``lastSuccessfulTime``. ``classify`` and ``sync_status`` must then give:
* every owned Job in exactly one class, by its terminal condition;
* never two ``status.active`` entries for one Job;
* ``status.active`` = the unfinished owned Jobs, plus the entries the cache lacks that
  the API server did not confirm gone (cache lag), nothing else;
* one ``SawCompletedJob`` per finished Job leaving ``active``, one ``MissingJob`` per
  confirmed-gone entry;
* ``lastSuccessfulTime`` = the latest of its old value and the successful Jobs'
  completion times: it never moves back;
* a second sync over the same world changes nothing and says nothing.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cronjob_operator.controllers.cronjob.history import Notice, sync_status, unconfirmed_active
from cronjob_operator.controllers.cronjob.jobs import JobSets, classify, job_reference
from cronjob_operator.controllers.cronjob.status import CronJobStatus, JobReference
from cronjob_operator.controllers.cronjob.view import job_times_of, status_of, time_at
from cronjob_operator.runtime.controllerutil import rfc3339
from cronjob_operator.runtime.objects import Obj, freeze

STATES = ("running", "Complete", "Failed")
NOISE = (
    {"type": "Complete", "status": "False"},
    {"type": "Failed", "status": "False"},
    {"type": "Suspended", "status": "True"},
    {"type": "FailureTarget", "status": "True"},
)

times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
).map(lambda t: t.replace(microsecond=0))


@dataclass(frozen=True)
class JobSpec:
    uid: str
    name: str
    state: str
    noise: tuple[int, ...]
    completion: datetime | None
    start: datetime | None

    def obj(self) -> Obj:
        conditions = [dict(NOISE[i]) for i in self.noise]
        if self.state != "running":
            conditions.append({"type": self.state, "status": "True"})
        status: dict[str, Any] = {"conditions": conditions}
        if self.completion is not None and self.state == "Complete":
            status["completionTime"] = rfc3339(self.completion)
        if self.start is not None:
            status["startTime"] = rfc3339(self.start)
        frozen: Obj = freeze(
            {
                "metadata": {
                    "name": self.name,
                    "namespace": "ns",
                    "uid": self.uid,
                    "resourceVersion": str(len(self.uid)),
                },
                "status": status,
            }
        )
        return frozen


@st.composite
def job_specs(draw: st.DrawFn, index: int) -> JobSpec:
    return JobSpec(
        uid=f"uid-{index}",
        # Names repeat: a Job deleted and created again under the same name is another Job.
        name=f"cj-{draw(st.integers(0, 5))}",
        state=draw(st.sampled_from(STATES)),
        noise=tuple(draw(st.lists(st.integers(0, len(NOISE) - 1), max_size=2))),
        completion=draw(st.none() | times),
        start=draw(st.none() | times),
    )


@dataclass(frozen=True)
class World:
    jobs: list[JobSpec]
    owned: list[JobSpec]
    active: list[JobReference]
    last_successful: datetime | None
    confirmed_missing: set[str]


@st.composite
def worlds(draw: st.DrawFn) -> World:
    count = draw(st.integers(0, 8))
    jobs = [draw(job_specs(i)) for i in range(count)]
    owned = [job for job in jobs if draw(st.booleans())]
    listed = draw(st.lists(st.sampled_from(jobs), max_size=10)) if jobs else []
    active = [job_reference(job.obj()) for job in listed]
    owned_uids = {job.uid for job in owned}
    unconfirmed = sorted({ref["uid"] for ref in active} - owned_uids)
    confirmed = {uid for uid in unconfirmed if draw(st.booleans())}
    return World(jobs, owned, active, draw(st.none() | times), confirmed)


def stored_status(world: World) -> CronJobStatus:
    status: dict[str, Any] = {"active": copy.deepcopy(world.active)}
    if world.last_successful is not None:
        status["lastSuccessfulTime"] = rfc3339(world.last_successful)
    return status_of(status)


def sync(world: World, status: CronJobStatus) -> tuple[JobSets, list[Notice]]:
    sets = classify([job.obj() for job in world.owned])
    owned = sets.owned()
    unconfirmed = {ref["uid"] for ref in unconfirmed_active(status, owned)}
    missing = [uid for uid in world.confirmed_missing if uid in unconfirmed]
    return sets, sync_status(status, sets, job_times_of(owned), confirmed_missing=missing)


def uids(objs: list[Obj]) -> list[str]:
    return [obj["metadata"]["uid"] for obj in objs]


@settings(max_examples=100, deadline=None)
@given(worlds())
def test_classify_puts_each_job_in_exactly_one_class(world: World) -> None:
    sets = classify([job.obj() for job in world.owned])
    classes = {
        "running": uids(sets.active),
        "Complete": uids(sets.successful),
        "Failed": uids(sets.failed),
    }
    every = [uid for members in classes.values() for uid in members]
    assert sorted(every) == sorted(job.uid for job in world.owned)
    for job in world.owned:
        assert job.uid in classes[job.state]


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_active_is_exactly_the_unfinished_owned_jobs_plus_unconfirmed(world: World) -> None:
    status = stored_status(world)
    _sets, notices = sync(world, status)
    active = [ref["uid"] for ref in status["active"]]

    assert len(active) == len(set(active)), f"two entries for one Job: {status['active']}"
    owned = {job.uid: job for job in world.owned}
    lagging = {ref["uid"] for ref in world.active} - owned.keys() - world.confirmed_missing
    running = {uid for uid, job in owned.items() if job.state == "running"}
    assert set(active) == running | lagging
    for ref in status["active"]:
        if ref["uid"] in owned:
            assert ref["name"] == owned[ref["uid"]].name
            assert (ref["apiVersion"], ref["kind"], ref["namespace"]) == ("batch/v1", "Job", "ns")

    was_active = {ref["uid"] for ref in world.active}
    finished = {uid for uid, job in owned.items() if job.state != "running"}
    saw = [n for n in notices if n.reason == "SawCompletedJob"]
    gone = [n for n in notices if n.reason == "MissingJob"]
    assert len(saw) == len(was_active & finished)
    assert len(gone) == len(was_active & world.confirmed_missing)
    assert len(notices) == len(saw) + len(gone)
    assert all(n.type == "Normal" for n in notices)


@settings(max_examples=200, deadline=None)
@given(worlds())
def test_last_successful_time_is_the_latest_and_never_moves_back(world: World) -> None:
    status = stored_status(world)
    sync(world, status)
    completions = [
        job.completion
        for job in world.owned
        if job.state == "Complete" and job.completion is not None
    ]
    candidates = [*completions, *([world.last_successful] if world.last_successful else [])]
    after = time_at(status, "lastSuccessfulTime")
    if not candidates:
        assert after is None
        return
    assert after == max(candidates)
    if world.last_successful is not None:
        assert after is not None
        assert after >= world.last_successful


@settings(max_examples=100, deadline=None)
@given(worlds())
def test_a_second_sync_changes_nothing(world: World) -> None:
    status = stored_status(world)
    sync(world, status)
    once = copy.deepcopy(status)
    _sets, notices = sync(world, status)
    assert notices == []
    assert status == once
