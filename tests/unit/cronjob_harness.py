"""The CronJob reconciler on the runtime's fake client, for unit tests of the reconcile.

One harness for every unit test that drives ``CronJobReconciler`` (test_cronjob_reconciler,
test_cronjob_requests_and_conditions, test_cronjob_api_failures, test_cronjob_schedule_edits,
test_cronjob_exactly_once): a ``Harness`` wires the reconciler to ``runtime.fake``'s client
and recorder, to a ``FakeClock`` and to a metrics registry of its own. It reconciles at a
chosen moment (plus the follow-up the work queue runs after a create, or without it, to
play a follow-up that waits behind other work), reconciles once from a stale cached copy
of the CronJob (by a new reconciler, or by the running one), counts the runs (distinct
Job uids per Job name among the reconciler's creates),
restarts the reconciler, and plays the rest of the cluster between reconciles: a user
editing a CronJob's spec, annotations or status or deleting it, and the Job controller
finishing a Job. Failures the API server gives are the fake client's reactors. Nothing
here reads the wall clock.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, cast

from prometheus_client import CollectorRegistry

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob import JOB_OWNER_INDEX, CronJobReconciler, job_owner_index
from cronjob_operator.controllers.metrics import CronJobMetrics
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.client import ClientInterface
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.controllerutil import find_condition, rfc3339
from cronjob_operator.runtime.fake import FakeClient, FakeClientBuilder, FakeRecorder
from cronjob_operator.runtime.kinds import JOB, Kind


def cronjob(
    name: str,
    namespace: str,
    *,
    created: datetime,
    spec: Mapping[str, Any],
    containers: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A v1 CronJob as a user would create it at ``created``: ``spec`` (the schedule at
    least) and a Job template with ``containers``."""
    metadata: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "creationTimestamp": rfc3339(created),
    }
    if annotations is not None:
        metadata["annotations"] = annotations
    template = {"spec": {"template": {"spec": {"containers": containers or []}}}}
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {"jobTemplate": template, **spec},
    }


class Harness:
    """A reconciler wired to a fake client, recorder and clock, reconciling ``name``."""

    def __init__(
        self, *initial: dict[str, Any], start: datetime, namespace: str, name: str
    ) -> None:
        self.clock = FakeClock(start)
        self.client: FakeClient = (
            FakeClientBuilder()
            .with_kinds(CRONJOB)
            .with_index(JOB, JOB_OWNER_INDEX, job_owner_index)
            .with_clock(self.clock)
            .with_objects(*initial)
            .build()
        )
        self.recorder = FakeRecorder()
        self.namespace, self.name = namespace, name
        self._uids: dict[str, set[str]] = {}
        self.registry = CollectorRegistry()
        self.metrics = CronJobMetrics(self.registry)
        self.reconciler = self._reconciler()

    def restart(self) -> None:
        """A new reconciler on the same client, recorder and clock (an operator restart):
        only what the API holds carries over (metrics start again)."""
        self.registry = CollectorRegistry()
        self.metrics = CronJobMetrics(self.registry)
        self.reconciler = self._reconciler()

    def _reconciler(self, cached: objects.Obj | None = None) -> CronJobReconciler:
        client = _Observed(self.client, self._uids, cached)
        if cached is None:
            self._observed = client
        return CronJobReconciler(
            cast(ClientInterface, client), self.recorder, clock=self.clock, metrics=self.metrics
        )

    def sample(self, metric: str, **labels: str) -> float | None:
        """A sample of the reconciler's metrics (None when the series does not exist)."""
        return self.registry.get_sample_value(metric, labels)

    def reconcile_at(self, moment: datetime) -> Result:
        """Reconcile at ``moment``, then run the follow-up the work queue runs after a create
        (Jobs first: the status of a new run is written by that follow-up)."""
        result = self.reconcile_once_at(moment)
        if result.follow_up:
            result = self.reconcile_once_at(moment)
        return result

    def reconcile_once_at(self, moment: datetime) -> Result:
        """One reconcile at ``moment``, without its follow-up (which the work queue may run
        much later, behind every other due run)."""
        self.clock.set(moment)
        return self.reconciler.reconcile(Request(self.namespace, self.name))

    def reconcile_stale_at(self, moment: datetime, cached: objects.Obj) -> Result:
        """One reconcile at ``moment`` whose cache still holds ``cached``, an older copy of
        the CronJob (a watch event not delivered yet); every other read and write is
        current."""
        self.clock.set(moment)
        return self._reconciler(cached).reconcile(Request(self.namespace, self.name))

    def reconcile_lagging_at(self, moment: datetime, cached: objects.Obj) -> Result:
        """One reconcile at ``moment`` by the same reconciler (what it remembers of its
        earlier reconciles carries over), its cache still holding ``cached``, an older copy
        of the CronJob; live reads and writes are current."""
        self.clock.set(moment)
        self._observed.cached = cached
        try:
            return self.reconciler.reconcile(Request(self.namespace, self.name))
        finally:
            self._observed.cached = None

    def runs(self) -> Counter[str]:
        """Per Job name, how many distinct Jobs (uids) the reconciler created: a run created
        twice counts 2, however soon the first was pruned."""
        return Counter({name: len(uids) for name, uids in self._uids.items()})

    # --- what the API holds ---------------------------------------------------------

    def cronjob(self) -> objects.Obj:
        return self.client.get(CRONJOB, self.name, self.namespace)

    def status(self) -> objects.Obj:
        return self.cronjob().get("status") or {}

    def condition(self, type_: str) -> dict[str, Any]:
        found = find_condition(objects.thaw(self.status().get("conditions") or []), type_)
        assert found is not None, f"no {type_} condition in {self.status()}"
        return found

    def jobs(self) -> dict[str, objects.Obj]:
        """The Jobs in the namespace, by name."""
        return {
            objects.name_of(job): job for job in self.client.list(JOB, namespace=self.namespace)
        }

    def status_writes(self) -> int:
        """How many CronJob status writes the API has been sent so far (no-ops included)."""
        return sum(
            1
            for write in self.client.writes
            if write.kind == CRONJOB and write.subresource == "status"
        )

    # --- the rest of the cluster ----------------------------------------------------

    def edit(self, change: Callable[[dict[str, Any]], object]) -> None:
        """A user's update of the CronJob (spec and metadata; a spec change moves the
        generation, as on the API server)."""
        body = objects.thaw(self.cronjob())
        change(body)
        self.client.update(CRONJOB, body)

    def edit_status(self, change: Callable[[dict[str, Any]], object]) -> None:
        """A write of the CronJob's status by someone else (a lost write, a second replica)."""
        body = objects.thaw(self.cronjob())
        change(body["status"])
        self.client.update_status(CRONJOB, body)

    def delete(self, *, finalizers: list[str]) -> None:
        """A user's delete of the CronJob, held by ``finalizers`` (added first) so the
        reconciler sees it terminating; ``deletionTimestamp`` is the clock's now."""
        self.edit(lambda body: body["metadata"].update(finalizers=finalizers))
        self.client.delete(CRONJOB, self.name, namespace=self.namespace)

    def finish(
        self,
        name: str,
        state: str = "Complete",
        *,
        at: datetime | None = None,
        started: datetime | None = None,
    ) -> None:
        """Mark a Job ``state`` (Complete or Failed) at ``at`` (now by default), as the Job
        controller would; it started at ``started`` (default: ``at``)."""
        at = at or self.clock()
        job = objects.thaw(self.client.get(JOB, name, self.namespace))
        job["status"] = {
            "conditions": [{"type": state, "status": "True", "lastTransitionTime": rfc3339(at)}],
            "startTime": rfc3339(started or at),
        }
        if state == "Complete":
            job["status"]["completionTime"] = rfc3339(at)
        self.client.update_status(JOB, job)


class _Observed:
    """The fake client as the reconciler sees it: every Job it creates is noted in
    ``uids``; with ``cached``, a get of the CronJob returns that older copy."""

    def __init__(
        self, client: FakeClient, uids: dict[str, set[str]], cached: objects.Obj | None
    ) -> None:
        self._client = client
        self._uids = uids
        self.cached = cached

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        if kind == CRONJOB and self.cached is not None:
            return self.cached
        return self._client.get(kind, name, namespace)

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        created = self._client.create(kind, obj)
        if kind == JOB:
            metadata = created["metadata"]
            self._uids.setdefault(metadata["name"], set()).add(metadata["uid"])
        return created

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._client, attribute)
