"""The assignment protocol on the fake client: assign, drain and acknowledge, take over.

The assigner's rounds (``Assigner.rebalance``) and the member's acknowledgement
(``DrainAcknowledger``) run against one ``FakeClient``, which keeps the API server's
resourceVersion preconditions; the member Leases are plain objects the test renews or
leaves alone, and the assigner's clock moves only when the test says.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from kubernetes import client as k8s_client
from prometheus_client import CollectorRegistry

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.client import RestClient
from cronjob_operator.runtime.controller import Request, Result
from cronjob_operator.runtime.fake import FakeClient
from cronjob_operator.runtime.kinds import JOB, LEASE
from cronjob_operator.runtime.sharding import (
    BUCKET_LABEL,
    DRAIN_LABEL,
    GROUP_LABEL,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL,
    Assigner,
    DrainAcknowledger,
    Ring,
    ShardingConfig,
    ShardingMetrics,
    bucket_of,
    bucket_owners,
)

NAMESPACE = "work"
CONFIG = ShardingConfig(group="g", kind=CRONJOB, owned=(JOB,), namespace="ops")
NAMES = [f"c{i:02d}" for i in range(30)]


class World:
    """A fake API server with member Leases, CronJobs and their Jobs, and an assigner."""

    def __init__(self) -> None:
        self.client = FakeClient()
        self.now = 0.0
        self.registry = CollectorRegistry()
        self.assigner = Assigner(
            RestClient(k8s_client.Configuration()),  # its informer is never started here
            self.client,
            CONFIG,
            identity="leader_1",
            metrics=ShardingMetrics(self.registry),
            clock=lambda: self.now,
        )
        for name in NAMES:
            cronjob = self.client.add(
                CRONJOB, {"metadata": {"name": name, "namespace": NAMESPACE}, "spec": {}}
            )
            self.client.add(
                JOB,
                {
                    "metadata": {
                        "name": f"{name}-100",
                        "namespace": NAMESPACE,
                        "ownerReferences": [
                            {
                                "apiVersion": CRONJOB.api_version,
                                "kind": "CronJob",
                                "name": name,
                                "uid": cronjob["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    }
                },
            )

    def metric(self, name: str, **labels: str) -> float:
        return self.registry.get_sample_value(name, {"group": "g", **labels}) or 0.0

    def join(self, member: str) -> None:
        self.client.add(
            LEASE,
            {
                "metadata": {"name": member, "namespace": "ops", "labels": {GROUP_LABEL: "g"}},
                "spec": {"holderIdentity": member, "leaseDurationSeconds": 15, "renewTime": "0"},
            },
        )

    def renew(self, member: str) -> None:
        lease = objects.thaw(self.client.get(LEASE, member, "ops"))
        lease["spec"]["renewTime"] = str(self.now)
        self.client.update(LEASE, lease)

    def round(self) -> None:
        """One assigner round over what its two caches would hold."""
        unbucketed = [
            (JOB, job)
            for job in self.client.list(JOB, namespace=NAMESPACE)
            if BUCKET_LABEL not in (job["metadata"].get("labels") or {})
        ]
        self.assigner.rebalance(self.client.list(CRONJOB, namespace=NAMESPACE), unbucketed)

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.client.get(CRONJOB, name, NAMESPACE)["metadata"].get("labels") or {})

    def owners(self) -> dict[str, str | None]:
        return {name: self.labels(name).get(SHARD_LABEL) for name in NAMES}

    def job_labels(self, name: str) -> dict[str, str]:
        job = self.client.get(JOB, f"{name}-100", NAMESPACE)
        return dict(job["metadata"].get("labels") or {})

    def acknowledge_drains(self, member: str) -> list[str]:
        """What the member's controller does for each drained CronJob it is asked about."""
        inner = Recording()
        acknowledger = DrainAcknowledger(
            inner, kind=CRONJOB, reader=self.client, writer=self.client, member=member
        )
        drained = [
            name
            for name in NAMES
            if DRAIN_LABEL in self.labels(name) and self.labels(name)[SHARD_LABEL] == member
        ]
        for name in drained:
            assert acknowledger.reconcile(Request(NAMESPACE, name)) == Result()
        assert inner.seen == []
        return drained


class Recording:
    def __init__(self) -> None:
        self.seen: list[str] = []

    def reconcile(self, request: Request) -> Result:
        self.seen.append(request.name)
        return Result()


def ring_owners(members: list[str]) -> dict[str, str | None]:
    owners = bucket_owners(Ring(members))
    return {name: owners[bucket_of(NAMESPACE, name)] for name in NAMES}


def bucket_labels() -> dict[str, dict[str, str]]:
    """Each CronJob's Job's labels once it carries its CronJob's bucket, and nothing else."""
    return {name: {BUCKET_LABEL: str(bucket_of(NAMESPACE, name))} for name in NAMES}


@pytest.fixture
def world() -> World:
    return World()


def test_nothing_is_assigned_before_a_member_joins(world: World) -> None:
    world.round()
    assert set(world.owners().values()) == {None}


def test_new_cronjobs_go_to_their_ring_owner_and_their_unlabelled_jobs_get_the_bucket(
    world: World,
) -> None:
    world.join("m1")
    world.join("m2")
    world.round()
    assert world.owners() == ring_owners(["m1", "m2"])
    assert set(Counter(world.owners().values())) == {"m1", "m2"}
    # Jobs made before sharding was on get their CronJob's bucket, which the member selects.
    assert {name: world.job_labels(name) for name in NAMES} == bucket_labels()


def test_jobs_of_other_owners_get_no_bucket(world: World) -> None:
    # The built-in batch/v1 CronJob's kind is also "CronJob": only the apiVersion tells.
    owners = {"builtin": ("batch/v1", "CronJob"), "plain": None}
    for name, owner in owners.items():
        metadata: dict[str, Any] = {"name": f"{name}-1", "namespace": NAMESPACE}
        if owner:
            api_version, kind = owner
            metadata["ownerReferences"] = [
                {
                    "apiVersion": api_version,
                    "kind": kind,
                    "name": name,
                    "uid": "u",
                    "controller": True,
                }
            ]
        world.client.add(JOB, {"metadata": metadata})
    world.join("m1")
    world.round()
    for name in owners:
        labels = world.client.get(JOB, f"{name}-1", NAMESPACE)["metadata"].get("labels") or {}
        assert BUCKET_LABEL not in labels
    assert {name: world.job_labels(name) for name in NAMES} == bucket_labels()


def test_jobs_of_an_earlier_release_lose_their_shard_label_for_the_bucket(world: World) -> None:
    for name in NAMES:  # the protocol before buckets labelled Jobs with their member
        job = objects.thaw(world.client.get(JOB, f"{name}-100", NAMESPACE))
        job["metadata"]["labels"] = {SHARD_LABEL: "old-member"}
        world.client.update(JOB, job)
    world.join("m1")
    world.round()
    assert {name: world.job_labels(name) for name in NAMES} == bucket_labels()


def test_jobs_without_a_bucket_come_from_a_metadata_only_cache_of_just_them(
    world: World,
) -> None:
    # A LIST of Jobs carries every pod template: the leader kept that high-water mark.
    (unbucketed,) = world.assigner._unbucketed
    reflector = unbucketed._reflector
    assert reflector._selection == {"labelSelector": "!sharding.cronjob-operator.io/bucket"}
    assert reflector._metadata_only


def test_every_job_gets_its_bucket_before_any_cronjob_is_assigned(world: World) -> None:
    world.join("m1")
    world.round()
    order = [action.kind.kind for action in world.client.writes_of("patch")]
    assert order == ["Job"] * len(NAMES) + ["CronJob"] * len(NAMES)


def test_a_new_member_gets_its_share_only_through_the_drain_handshake(world: World) -> None:
    world.join("m1")
    world.join("m2")
    world.round()
    before = world.owners()
    job_writes = len(world.client.writes_of("patch", JOB))
    world.join("m3")
    world.round()
    target = ring_owners(["m1", "m2", "m3"])
    moving = sorted(name for name in NAMES if target[name] != before[name])
    assert moving
    assert all(target[name] == "m3" for name in moving)
    assert world.owners() == before  # nothing moved yet: only asked to drain
    assert sorted(n for n in NAMES if DRAIN_LABEL in world.labels(n)) == moving

    world.round()  # no acknowledgement yet: still nothing moves
    assert world.owners() == before

    acknowledged: list[str] = []
    for member in ("m1", "m2"):
        acknowledged += world.acknowledge_drains(member)
    assert sorted(acknowledged) == moving
    for name in moving:
        assert world.labels(name) == {}  # given up: no member has it now
        annotations = world.client.get(CRONJOB, name, NAMESPACE)["metadata"]["annotations"]
        assert annotations[PREVIOUS_ANNOTATION] == before[name]

    world.now = 2.5
    world.round()
    assert world.owners() == target
    # A move writes only the CronJob: its Jobs carry its bucket, which moved with it.
    assert len(world.client.writes_of("patch", JOB)) == job_writes
    assert {name: world.job_labels(name) for name in NAMES} == bucket_labels()
    assert world.metric("sharding_members") == 3
    assert world.metric("sharding_assignments_total", reason="new") == len(NAMES)
    assert world.metric("sharding_drains_total") == len(moving)
    assert world.metric("sharding_assignments_total", reason="drained") == len(moving)
    assert world.metric("sharding_drain_duration_seconds_count") == len(moving)
    assert world.metric("sharding_drain_duration_seconds_sum") == 2.5 * len(moving)
    for name in moving:
        metadata = world.client.get(CRONJOB, name, NAMESPACE)["metadata"]
        assert PREVIOUS_ANNOTATION not in (metadata.get("annotations") or {})


def test_an_acknowledgement_of_a_stale_copy_is_refused(world: World) -> None:
    world.join("m1")
    world.round()
    world.join("m2")
    world.round()
    drained = next(n for n in NAMES if DRAIN_LABEL in world.labels(n))
    stale = world.client.get(CRONJOB, drained, NAMESPACE)
    changed = objects.thaw(stale)
    changed["spec"] = {"suspend": True}
    world.client.update(CRONJOB, changed)

    class StaleReader:
        def get(self, kind: Any, name: str, namespace: str | None = None) -> objects.Obj:
            return stale

        def list(self, kind: Any, **options: Any) -> list[objects.Obj]:
            return [stale]

    acknowledger = DrainAcknowledger(
        Recording(),
        kind=CRONJOB,
        reader=StaleReader(),
        writer=world.client,
        member="m1",
    )
    with pytest.raises(errors.Conflict):  # retried by the controller from the newer copy
        acknowledger.reconcile(Request(NAMESPACE, drained))
    assert world.labels(drained)[SHARD_LABEL] == "m1"


def test_an_expired_member_is_taken_over_then_its_cronjobs_move_without_a_drain(
    world: World,
) -> None:
    world.join("m1")
    world.join("m2")
    world.round()
    before = world.owners()
    world.now = 14.9
    world.renew("m2")
    world.round()
    assert world.owners() == before  # m1 silent for 14.9 s of our clock: still live

    world.now = 15.0
    world.round()  # m2 renewed at 14.9, so the assigner saw a new record then
    lease = world.client.get(LEASE, "m1", "ops")
    assert lease["spec"]["holderIdentity"] == "leader_1"
    assert world.owners() == dict.fromkeys(NAMES, "m2")
    assert not any(DRAIN_LABEL in world.labels(name) for name in NAMES)
    moved = sum(1 for owner in before.values() if owner == "m1")
    assert world.metric("sharding_assignments_total", reason="orphaned") == moved
    assert world.metric("sharding_members") == 1

    world.round()  # no CronJob names m1 any more: its Lease goes
    assert [lease["metadata"]["name"] for lease in world.client.list(LEASE)] == ["m2"]


def test_a_member_that_renews_before_the_takeover_keeps_its_cronjobs(world: World) -> None:
    world.join("m1")
    world.join("m2")
    world.round()
    before = world.owners()
    world.now = 15.0

    def renewed_first(action: Any) -> errors.ApiError | None:
        return errors.Conflict({"message": "the object has been modified"}, code=409)

    world.client.prepend_reactor("update", LEASE, renewed_first)
    world.round()
    assert world.owners() == before
    assert world.client.get(LEASE, "m1", "ops")["spec"]["holderIdentity"] == "m1"


def test_a_released_member_loses_its_cronjobs_at_once(world: World) -> None:
    world.join("m1")
    world.join("m2")
    world.round()
    lease = objects.thaw(world.client.get(LEASE, "m1", "ops"))
    lease["spec"]["holderIdentity"] = ""
    world.client.update(LEASE, lease)
    world.round()
    assert world.owners() == dict.fromkeys(NAMES, "m2")
