"""Several CronJobs sharing a ConcurrencyGroup on the fake API server, with the faults a
controller meets: the world the stateful exactly-once test (``test_exactly_once_stories``)
plays its stories in, and the ledger of every run the reconcilers started.

Why a world of its own: ``cronjob_harness.Harness`` reconciles one CronJob on a fake that
never fails and never lags. The promise that each run starts once has to hold where the
features meet and where the cluster misbehaves, so this world has

* several CronJobs, some of them in one ``ConcurrencyGroup``;
* a cache that lags: reads of CronJobs and Jobs are answered from a snapshot of the API
  taken earlier (``lag``), while ``live`` reads and every write reach the current API;
* status writes refused (409 Conflict, 500), a Job create that times out after the API
  server stored the Job, a refused delete;
* a restart (new reconcilers: every memory of the old ones is gone);
* Jobs finishing, failing or deleted by someone else.

Every Job a reconciler creates is recorded in the ``Ledger`` with the run it stands for
(its identity: a scheduled time, a run request's token, a backfill's token and time) and
the state of the API at that moment, so the test can ask after any step whether a run
started twice or a limit was exceeded at the instant of a create.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections import Counter
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from prometheus_client import CollectorRegistry

from cronjob_operator.api.batch_v1 import BACKFILL_ANNOTATION, CRONJOB, RUN_ANNOTATION
from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, CronJobReconciler, job_owner_index
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.controllerutil import parse_time, rfc3339
from cronjob_operator.runtime.fake import Action, FakeClient, FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import JOB, Kind
from tests.unit.cronjob_harness import cronjob
from tests.unit.run_model import Identity, Run, Settled

NS = "story"
GROUP = "g"
SETTLE_ROUNDS = 10
SETTLE_STEPS = 1000
"""Reconciles of one CronJob in a row at one instant, at most (a 1,000-time backfill)."""
AT_ONCE = 2.0
"""A requeue this soon (seconds) is the next step of the same work (``due.SOON``)."""
BACKFILL_TOKEN = "batch.tutorial.kubebuilder.io/backfill-token"


class Ledger:
    """Every Job the reconcilers created, in order, with the run each stands for."""

    def __init__(self) -> None:
        self.starts: list[Run] = []
        self.request_epochs: dict[tuple[str, str], int] = {}
        """How often each (CronJob, token) was newly requested: a token set again after
        another one is a new request, the same run only while it stays."""
        self.backfill_epochs: dict[tuple[str, str], int] = {}
        self.backfill_began: dict[Identity, int] = {}
        """Where in ``starts`` each backfill epoch began."""
        self.backfill_tokens: dict[str, str] = {}
        """Each CronJob's latest backfill token."""
        self.lost: Counter[Identity] = Counter()
        """Runs whose only evidence, their Job, someone else deleted: the controller cannot
        know they started, so they may start again."""

    def identity(self, cron_job: str, job: objects.Obj) -> Identity:
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        name = objects.name_of(job)
        token = annotations.get("batch.tutorial.kubebuilder.io/run-request")
        if token is not None:
            return ("request", cron_job, token, self.request_epochs.get((cron_job, token), 0))
        backfill = annotations.get(BACKFILL_TOKEN)
        suffix = name.rsplit("-", 1)[1]
        if backfill is not None:
            epoch = self.backfill_epochs.get((cron_job, backfill), 0)
            return ("backfill", cron_job, backfill, epoch, suffix)
        return ("scheduled", cron_job, suffix)


class _CacheView:
    """The client a reconciler holds: cached reads come from ``snapshot`` while the cache
    lags (None: current), ``live`` reads and writes reach the API; a Job create is
    noted in the world's ledger, and may be made to time out after it was stored."""

    def __init__(self, world: StoryWorld) -> None:
        self._world = world
        self.live = world.client

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        return self._reader(kind).get(kind, name, namespace)

    def list(self, kind: Kind, **options: Any) -> list[objects.Obj]:
        return sorted(self._reader(kind).list(kind, **options), key=objects.name_of)

    def _reader(self, kind: Kind) -> FakeClient:
        snapshot = self._world.snapshot
        if snapshot is not None and kind in (CRONJOB, JOB):
            return snapshot
        return self._world.client

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        world = self._world
        if kind != JOB:
            return world.client.create(kind, obj)
        start = world.note_start(obj)
        created = world.client.create(kind, obj)
        created = world.started(created)
        world.ledger.starts.append(dataclasses.replace(start, uid=created["metadata"]["uid"]))
        if world.faults.pop("create-timeout", None):
            raise errors.ServerError(
                {"reason": "Timeout", "message": "the create timed out"}, code=504
            )
        return created

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._world.client, attribute)


class StoryWorld:
    """CronJobs of one namespace, some in group ``g``, their reconcilers and the faults."""

    def __init__(
        self, specs: Mapping[str, Mapping[str, Any]], *, start: datetime, group_limit: int
    ) -> None:
        self.clock = FakeClock(start)
        self.created = start
        self.group_limit = group_limit
        group = {
            "apiVersion": CONCURRENCY_GROUP.api_version,
            "kind": CONCURRENCY_GROUP.kind,
            "metadata": {"name": GROUP, "namespace": NS},
            "spec": {"limit": group_limit},
        }
        bodies = [cronjob(name, NS, created=start, spec=spec) for name, spec in specs.items()]
        self.names = sorted(specs)
        self.client: FakeClient = (
            FakeClientBuilder()
            .with_kinds(CRONJOB, CONCURRENCY_GROUP)
            .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
            .with_clock(self.clock)
            .with_objects(group, *bodies)
            .build()
        )
        self.snapshot: FakeClient | None = None
        self.faults: dict[str, errors.ApiError | bool] = {}
        self.ledger = Ledger()
        self.recorder = FakeRecorder()
        self.client.prepend_reactor("update", CRONJOB, self._status_fault)
        self.client.prepend_reactor("patch", CRONJOB, self._status_fault)
        self.client.prepend_reactor("delete", JOB, lambda _: self._pop_error("delete"))
        self.reconciler = self._reconciler()

    # --- the controller -----------------------------------------------------------------

    def _reconciler(self) -> CronJobReconciler:
        return CronJobReconciler(
            _CacheView(self),  # type: ignore[arg-type]
            self.recorder,
            clock=self.clock,
            metrics=CronJobMetrics(CollectorRegistry()),
        )

    def restart(self) -> None:
        """A new process: the reconciler's memories are gone, only the API holds, and its
        cache starts with a fresh LIST (it may lag from then on, never from before)."""
        self.catch_up()
        self.reconciler = self._reconciler()

    def reconcile(self, name: str) -> Result | errors.ApiError:
        """One reconcile of ``name`` at the clock's now; an API error is returned (the work
        queue would retry it), not raised."""
        try:
            return self.reconciler.reconcile(Request(NS, name))
        except errors.ApiError as exc:
            return exc

    def lag(self) -> None:
        """From now on the cache answers from the API as it is at this instant."""
        builder = (
            FakeClientBuilder()
            .with_kinds(CRONJOB)
            .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
        )
        for kind in (CRONJOB, JOB):
            builder.with_objects(*self.client.list(kind, namespace=NS))
        self.snapshot = builder.with_clock(self.clock).build()

    def catch_up(self) -> None:
        """The cache has delivered every event."""
        self.snapshot = None

    # --- faults ---------------------------------------------------------------------------

    def _status_fault(self, action: Action) -> errors.ApiError | None:
        if action.subresource != "status":
            return None
        return self._pop_error("status")

    def _pop_error(self, verb: str) -> errors.ApiError | None:
        error = self.faults.pop(verb, None)
        return error if isinstance(error, errors.ApiError) else None

    def fail_next(self, verb: str, code: int) -> None:
        """The next ``verb`` (status, delete) is refused with ``code``; ``create-timeout``:
        the next Job create is stored, then answered with a timeout."""
        if verb == "create-timeout":
            self.faults[verb] = True
            return
        kind = {409: errors.Conflict, 500: errors.ServerError}[code]
        self.faults[verb] = kind(
            {"reason": kind.__name__, "message": f"injected {code}"}, code=code
        )

    def settle(self) -> None:
        """Quiescence at this instant: no fault, the cache current, every CronJob reconciled
        again while it asks for it at once or its reconcile wrote (whose watch event would
        bring it back), until a round writes nothing to CronJobs or Jobs.

        Group writes are left out of that count: a waiting run still asks again on every
        poll and moves itself in the group's ``status.waiting`` (the cost the
        ConcurrencyGroup controller is to remove)."""
        self.faults.clear()
        self.catch_up()
        for _ in range(SETTLE_ROUNDS):
            before = self._writes()
            for name in self.names:
                for _ in range(SETTLE_STEPS):
                    wrote = self._writes()
                    result = self.reconcile(name)
                    if isinstance(result, errors.ApiError):
                        break
                    # A write's watch event reconciles again at once, as a follow-up does.
                    if not at_once(result) and self._writes() == wrote:
                        break
            if self._writes() == before:
                return
        raise AssertionError(f"still writing after {SETTLE_ROUNDS} rounds at one instant")

    def _writes(self) -> int:
        return sum(1 for write in self.client.writes if write.kind in (CRONJOB, JOB))

    def status(self, name: str) -> objects.Obj:
        return self.client.get(CRONJOB, name, NS).get("status") or {}

    def spec(self, name: str) -> objects.Obj:
        return self.client.get(CRONJOB, name, NS)["spec"]

    # --- the rest of the cluster ----------------------------------------------------------

    def edit(self, name: str, **spec: Any) -> None:
        """A user's edit of ``name``'s spec (None removes a field)."""
        body = objects.thaw(self.client.get(CRONJOB, name, NS))
        for key, value in spec.items():
            if value is None:
                body["spec"].pop(key, None)
            else:
                body["spec"][key] = value
        self.client.update(CRONJOB, body)

    def annotate(self, name: str, key: str, value: str | None) -> None:
        body = objects.thaw(self.client.get(CRONJOB, name, NS))
        annotations = body["metadata"].setdefault("annotations", {})
        previous = annotations.get(key)
        if value is None:
            annotations.pop(key, None)
            if key == BACKFILL_ANNOTATION:
                self.ledger.backfill_tokens.pop(name, None)
        else:
            annotations[key] = value
        self.client.update(CRONJOB, body)
        if value is not None and value != previous:
            self._new_epoch(name, key, value)

    def _new_epoch(self, name: str, key: str, value: str) -> None:
        if key == RUN_ANNOTATION:
            epochs = self.ledger.request_epochs
            epochs[(name, value)] = epochs.get((name, value), 0) + 1
        elif key == BACKFILL_ANNOTATION:
            # The same token again is the same request (it does nothing new).
            token = str(json.loads(value).get("token"))
            if self.ledger.backfill_tokens.get(name) != token:
                epochs = self.ledger.backfill_epochs
                epochs[(name, token)] = epoch = epochs.get((name, token), 0) + 1
                self.ledger.backfill_began[("backfill", name, token, epoch)] = len(
                    self.ledger.starts
                )
            self.ledger.backfill_tokens[name] = token

    def jobs(self) -> list[objects.Obj]:
        return sorted(self.client.list(JOB, namespace=NS), key=objects.name_of)

    def started(self, job: objects.Obj) -> dict[str, Any]:
        """The Job controller starts a new Job at once (``status.startTime``); its Pods
        never show (no kubelet here), so a run past ``runStartTimeoutSeconds`` is ended."""
        body = objects.thaw(job)
        body["status"] = {"startTime": rfc3339(self.clock()), "active": 1}
        return self.client.update_status(JOB, body)

    def finish(self, job: str, state: str) -> None:
        """The Job controller marks ``job`` Complete or Failed now."""
        body = objects.thaw(self.client.get(JOB, job, NS))
        now = rfc3339(self.clock())
        body["status"] = {
            "conditions": [{"type": state, "status": "True", "lastTransitionTime": now}],
            "startTime": (body.get("status") or {}).get("startTime") or now,
        }
        if state == "Complete":
            body["status"]["completionTime"] = now
        self.client.update_status(JOB, body)

    def delete_job(self, job: str) -> None:
        """Someone else deletes ``job`` (the faults are the controller's, not theirs). A Job
        the CronJob's stored status does not record yet was the only evidence of its run:
        that run may start again (``Ledger.lost``)."""
        held = self.faults.pop("delete", None)
        with contextlib.suppress(errors.NotFound):
            uid = self.client.get(JOB, job, NS)["metadata"]["uid"]
            for start in self.ledger.starts:
                if start.uid == uid and not self._recorded(start):
                    self.ledger.lost[start.identity] += 1
            self.client.delete(JOB, job, namespace=NS)
        if held is not None:
            self.faults["delete"] = held

    def _settled_through(self, name: str) -> int | None:
        through = (self.status(name).get("skippedRuns") or {}).get("accountedThrough")
        return _seconds(through) if through else None

    def _recorded(self, start: Run) -> bool:
        """Whether the stored status of ``start``'s CronJob records its run: any run by
        its Job in ``status.active`` (a Job gone from there is a run that went missing,
        not one that never started), a request by ``lastHandledRunRequest``, a backfill
        step by its backfill's progress, a scheduled run by ``lastScheduleTime``."""
        status = self.status(start.cron_job)
        if any(ref.get("uid") == start.uid for ref in status.get("active") or ()):
            return True
        kind = start.identity[0]
        if kind == "request":
            return bool(status.get("lastHandledRunRequest") == start.identity[2])
        moment = int(start.identity[-1])
        if kind == "backfill":
            progress = status.get("backfill") or {}
            following = progress.get("next")
            return progress.get("token") == start.identity[2] and (
                progress.get("state") != "Running"
                or (following is not None and moment < _seconds(following))
            )
        last = status.get("lastScheduleTime")
        return bool(last) and moment <= _seconds(last)

    def later(self, delta: timedelta) -> None:
        self.clock.set(self.clock() + delta)

    # --- the ledger -----------------------------------------------------------------------

    def note_start(self, job: Mapping[str, Any]) -> Run:
        """Called at a Job create, before the API stores it: what holds at this instant."""
        owner = job_owner_index(objects.freeze(dict(job)))
        cron_job = owner[0] if owner else "?"
        # The spec the reconciler acts on: the cache's, while it lags, or the API's
        # current one, which its own status write returned; a policy in flux is
        # judged by the more permissive of the two.
        spec = (self.snapshot or self.client).get(CRONJOB, cron_job, NS)["spec"]
        live_policy = self.client.get(CRONJOB, cron_job, NS)["spec"].get("concurrencyPolicy")
        policy = str(spec.get("concurrencyPolicy") or "Allow")
        if (live_policy or "Allow") == "Allow":
            policy = "Allow"
        running = [
            objects.name_of(other)
            for other in self.client.list(
                JOB, namespace=NS, matching_fields={JOB_OWNER_INDEX: cron_job}
            )
            if unfinished(other)
        ]
        grouped = (spec.get("concurrencyGroup") or {}).get("name") == GROUP
        group_active = 0
        if grouped:
            members = {
                objects.name_of(c)
                for c in self.client.list(CRONJOB, namespace=NS)
                if (c["spec"].get("concurrencyGroup") or {}).get("name") == GROUP
            }
            group_active = sum(
                1
                for other in self.jobs()
                if unfinished(other) and set(job_owner_index(other)) & members
            )
        frozen = objects.freeze(dict(job))
        return Run(
            cron_job=cron_job,
            job=objects.name_of(frozen),
            uid="",
            identity=self.ledger.identity(cron_job, frozen),
            policy=policy,
            others_unfinished=tuple(running),
            group_unfinished=group_active,
            group_limit=self.group_limit if grouped else None,
            run_limit=spec.get("maxScheduledRuns"),
            settled_through=self._settled_through(cron_job),
            pending=frozenset(
                int(moment.timestamp()) for moment in Settled.of(self.status(cron_job)).pending
            ),
        )


def unfinished(job: objects.Obj) -> bool:
    """A Job with neither Complete nor Failed true, not being deleted."""
    if job["metadata"].get("deletionTimestamp"):
        return False
    return not any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


def _seconds(stamp: str) -> int:
    moment = parse_time(stamp)
    assert moment is not None, stamp
    return int(moment.timestamp())


def at_once(result: Result) -> bool:
    """Whether the work queue runs the next reconcile at once: a follow-up, or a requeue
    within ``AT_ONCE`` (a catch-up step, a backfill step)."""
    return result.follow_up or 0 < result.requeue_after <= AT_ONCE
