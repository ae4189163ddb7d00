"""The assigner: labels each sharded object with its member, moving objects safely.

A manager Runnable that needs the leader Lease, so exactly one runs (beside the
controllers that are not sharded). It keeps a cache of its own of the sharded kind's
metadata (every object, not one member's share; watched as ``PartialObjectMetadata``,
so the API server sends no spec or status, not even for a status write) and, every
``retry_period`` and
whenever an object appears or its labels change:

1. lists the group's member Leases and observes each on its own clock
   (``_membership``); an EXPIRED Lease is taken over first (the assigner writes itself
   as holder with the resourceVersion it read), and its member counts as GONE only when
   that write succeeded;
2. computes the writes with ``_plan.plan`` over the ring of LIVE members and sends
   them from ``assign_workers`` threads (one object's writes in order on one thread;
   the API server is the limit, not this process), each with the resourceVersion it
   read (a Conflict waits for the next round):
   ``Drain`` sets the drain label; ``Assign`` sets the shard label and clears the
   drain label and the previous-shard annotation. Owned objects made by a member carry
   their bucket from birth, and a bucket never changes: a move writes nothing but the
   moved object. Owned objects without a bucket (made before sharding was on, or by an
   earlier release) are in a metadata-only cache of the assigner's (selector
   ``!bucket``: empty once every one has its bucket, so it costs nothing after) and
   get their owner's bucket first in each round, before any object is assigned, so a
   member that gets an object finds its owned objects in its cache;
3. deletes the Leases of GONE members that no object names any more.

The leader's write fence covers these writes (``client`` is the manager's client).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from cronjob_operator.runtime import errors, kinds, objects
from cronjob_operator.runtime.cache import Informer
from cronjob_operator.runtime.client import ClientInterface, RestClient
from cronjob_operator.runtime.leaderelection import (
    Observation,
    acquired_record,
    lease_spec,
    observe,
    record_from_lease,
)
from cronjob_operator.runtime.sharding._config import ShardingConfig
from cronjob_operator.runtime.sharding._labels import (
    BUCKET_LABEL,
    DRAIN_LABEL,
    GROUP_LABEL,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL,
    annotations_of,
    bucket_of,
    labels_of,
)
from cronjob_operator.runtime.sharding._membership import MemberState, member_state
from cronjob_operator.runtime.sharding._metrics import ShardingMetrics
from cronjob_operator.runtime.sharding._plan import Assign, Drain, Placement, placement, plan
from cronjob_operator.runtime.sharding._ring import Ring

log = logging.getLogger(__name__)

_MIN_ROUND_INTERVAL = 0.2
"""Rounds triggered by events come at most this often (a burst of labels is one round)."""


def placement_metadata(obj: dict[str, Any]) -> dict[str, Any]:
    """Cache transform of the assigner: only the metadata a ``Placement`` reads."""
    metadata = obj.get("metadata") or {}
    previous = annotations_of(obj).get(PREVIOUS_ANNOTATION)
    kept = {
        key: metadata[key]
        for key in ("name", "namespace", "uid", "resourceVersion", "labels")
        if key in metadata
    }
    if previous:
        kept["annotations"] = {PREVIOUS_ANNOTATION: previous}
    return {"metadata": kept}


class _Wake:
    """Informer handler: wake the assigner when an object appears or its labels change."""

    def __init__(self, event: threading.Event) -> None:
        self._event = event

    def on_add(self, obj: objects.Obj) -> None:
        self._event.set()

    def on_update(self, old: objects.Obj, new: objects.Obj) -> None:
        if labels_of(old) != labels_of(new):
            self._event.set()

    def on_delete(self, obj: objects.Obj) -> None:
        """A deleted object needs no assignment."""


class Assigner:
    """Assigns the group's objects to its live members (module doc)."""

    def __init__(
        self,
        rest: RestClient,
        client: ClientInterface,
        config: ShardingConfig,
        *,
        identity: str,
        metrics: ShardingMetrics,
        clock: Callable[[], float] = time.monotonic,
        namespace: str | None = None,
    ) -> None:
        self.config = config
        self._client = client
        self._identity = identity
        self._metrics = metrics
        self._clock = clock
        self._informer = Informer(
            rest,
            config.kind,
            namespace=namespace,
            transform=placement_metadata,
            metadata_only=True,
        )
        self._unbucketed = [
            Informer(
                rest,
                kind,
                namespace=namespace,
                label_selector=f"!{BUCKET_LABEL}",
                metadata_only=True,
            )
            for kind in config.owned
        ]
        self._wake = threading.Event()
        for informer in (self._informer, *self._unbucketed):
            informer.add_handler(_Wake(self._wake))
        self._observations: dict[str, Observation] = {}
        self._drain_started: dict[str, float] = {}

    needs_leader_election = True
    """One assigner at a time: the leader's."""

    def run(self, stop: threading.Event) -> None:
        """Assign until ``stop`` is set; API errors are logged and retried next round."""
        informers = (self._informer, *self._unbucketed)
        for informer in informers:
            informer.start()
        try:
            for informer in informers:
                while not stop.is_set() and not informer.wait_for_sync(self.config.retry_period):
                    pass
            while not stop.is_set():
                self._wake.clear()
                try:
                    self.sync()
                except (errors.ApiError, errors.TransportError) as exc:
                    log.warning("sharding round failed, retrying: %s", exc)
                self._wake.wait(self.config.retry_period)
                stop.wait(_MIN_ROUND_INTERVAL)
        finally:
            for informer in informers:
                informer.stop()

    def sync(self) -> None:
        """One round over the assigner's caches (module doc)."""
        unbucketed = [
            (informer.kind, obj) for informer in self._unbucketed for obj in informer.store.list()
        ]
        self.rebalance(self._informer.store.list(), unbucketed)

    def rebalance(
        self,
        sharded: Iterable[objects.Obj],
        unbucketed: Iterable[tuple[kinds.Kind, objects.Obj]] = (),
    ) -> None:
        """One round: give ``unbucketed`` owned objects their bucket, observe the members,
        then move ``sharded`` as the plan says."""
        with ThreadPoolExecutor(self.config.assign_workers, "assigner") as pool:
            list(pool.map(lambda owned: self._give_bucket(*owned), unbucketed))
            members = self._members()
            live = [name for name, state in members.items() if state is MemberState.LIVE]
            self._metrics.members.labels(self.config.group).set(len(live))
            ring = Ring(live, virtual_nodes=self.config.virtual_nodes)
            placements = [placement(obj) for obj in sharded]
            actions = plan(placements, members, ring)
            list(pool.map(self._act, actions))
        self._forget_gone(members, placements)

    def _act(self, action: Assign | Drain) -> None:
        try:
            if isinstance(action, Drain):
                self._drain(action)
            else:
                self._assign(action)
        except (errors.Conflict, errors.NotFound):
            log.debug("%s changed while we moved it; next round", action.target.key)

    def _members(self) -> dict[str, MemberState]:
        leases = self._client.live.list(
            kinds.LEASE,
            namespace=self.config.namespace,
            label_selector={GROUP_LABEL: self.config.group},
        )
        members: dict[str, MemberState] = {}
        for lease in leases:
            name = str(lease["metadata"]["name"])
            now = self._clock()
            observation = observe(self._observations.get(name), record_from_lease(lease), now)
            self._observations[name] = observation
            state = member_state(name, observation, now)
            if state is MemberState.EXPIRED and self._take_over(lease, observation):
                state = MemberState.GONE
            members[name] = state
        for gone in set(self._observations) - set(members):
            del self._observations[gone]
        return members

    def _take_over(self, lease: Mapping[str, Any], observation: Observation) -> bool:
        """Write ourselves into an expired member's Lease; True when that proved it gone."""
        record = acquired_record(
            observation.record,
            identity=self._identity,
            lease_duration_seconds=observation.record.lease_duration_seconds,
            now=datetime.now(UTC),
        )
        body = objects.thaw(lease)
        body["spec"] = lease_spec(record)
        name = lease["metadata"]["name"]
        try:
            self._client.update(kinds.LEASE, body)
        except (errors.ApiError, errors.TransportError) as exc:
            log.info("could not take over the Lease of shard %s: %s", name, exc)
            return False
        log.warning("shard %s stopped renewing its Lease: took it over, moving its objects", name)
        return True

    def _drain(self, action: Drain) -> None:
        target = action.target
        self._patch_labels(target, {DRAIN_LABEL: "true"})
        self._drain_started[target.uid] = self._clock()
        self._metrics.drains.labels(self.config.group).inc()

    def _assign(self, action: Assign) -> None:
        target = action.target
        self._patch_labels(
            target,
            {SHARD_LABEL: action.shard, DRAIN_LABEL: None},
            annotations={PREVIOUS_ANNOTATION: None} if target.previous else None,
        )
        self._metrics.moves.labels(self.config.group, action.reason).inc()
        started = self._drain_started.pop(target.uid, None)
        if started is not None and action.reason == "drained":
            self._metrics.drain_seconds.labels(self.config.group).observe(self._clock() - started)
        log.info(
            "assigned",
            extra={"object": target.key, "shard": action.shard, "reason": action.reason},
        )

    def _give_bucket(self, kind: kinds.Kind, obj: objects.Obj) -> None:
        """Label an owned object with its controller owner's bucket (none: left alone)."""
        owner = objects.controller_ref(obj)
        sharded = self.config.kind
        if not owner or (owner.get("apiVersion"), owner.get("kind")) != (
            sharded.api_version,
            sharded.kind,
        ):
            return  # not ours: a built-in batch/v1 CronJob's Job, a plain Job
        namespace = objects.namespace_of(obj) or ""
        # The shard label goes too: owned objects of an earlier release carried it.
        labels = {BUCKET_LABEL: str(bucket_of(namespace, str(owner["name"]))), SHARD_LABEL: None}
        try:
            self._client.patch(
                kind, objects.name_of(obj), {"metadata": {"labels": labels}}, namespace=namespace
            )
        except errors.NotFound:
            pass  # deleted meanwhile (pruned, collected)
        except (errors.ApiError, errors.TransportError) as exc:
            log.info("could not give %s its bucket; next round: %s", objects.name_of(obj), exc)

    def _patch_labels(
        self,
        target: Placement,
        labels: Mapping[str, str | None],
        *,
        annotations: Mapping[str, str | None] | None = None,
    ) -> None:
        metadata: dict[str, Any] = {
            "resourceVersion": target.resource_version,
            "labels": dict(labels),
        }
        if annotations:
            metadata["annotations"] = dict(annotations)
        self._client.patch(
            self.config.kind, target.name, {"metadata": metadata}, namespace=target.namespace
        )

    def _forget_gone(self, members: Mapping[str, MemberState], placements: list[Placement]) -> None:
        """Delete the Leases of GONE members once no object names them."""
        named = {p.shard for p in placements} | {p.previous for p in placements}
        for name, state in members.items():
            if state is MemberState.GONE and name not in named:
                with contextlib.suppress(errors.NotFound):
                    self._client.delete(kinds.LEASE, name, namespace=self.config.namespace)
                self._observations.pop(name, None)
                log.info("removed the Lease of departed shard %s", name)
