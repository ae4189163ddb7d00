"""Sharding: every replica reconciles its share of one kind, and no object is ever
reconciled by two replicas at once.

The design is timebertt/kubernetes-controller-sharding's, on Kubernetes primitives only:

* membership: each replica (``Shard``) holds a Lease of its own, labelled with the shard
  group, kept by the leader elector's loop and fencing the replica's writes the same way
  (``_shard``, ``_membership``);
* assignment: one ``Assigner``, on the replica holding the leader Lease, labels each
  object with the owner of its bucket on a consistent hash ring of the live members
  (``_ring``, ``_plan``); the objects it owns (Jobs of a CronJob) carry the bucket,
  written once at their creation (``_labels``);
* filtering: each replica's informer of the sharded kind selects on its own label, its
  owned-object informers on the buckets of its share (``_selection``), so the API
  server sends it only its share (``Cache.set_label_selector``, ``Cache.reselect``);
* moves: to a live member only after the old one acknowledged a drain; from a member
  whose Lease expired on the assigner's clock only after the assigner took the Lease
  over; from a member that released its Lease (after stopping) at once.

``attach`` wires a group into a manager; docs/sharding.md says what each step
guarantees. Everything here is opt-in: a manager without ``attach`` is unchanged.
"""

from __future__ import annotations

import os
import socket

from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.leaderelection import POD_NAME_ENV
from cronjob_operator.runtime.manager import Manager
from cronjob_operator.runtime.sharding._assigner import Assigner
from cronjob_operator.runtime.sharding._config import ShardingConfig
from cronjob_operator.runtime.sharding._labels import (
    BUCKET_LABEL,
    BUCKETS,
    DRAIN_LABEL,
    GROUP_LABEL,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL,
    bucket_of,
    bucket_selector,
    inherited_labels,
    owned_object_labels,
    shard_selector,
)
from cronjob_operator.runtime.sharding._membership import MemberState, member_name, member_state
from cronjob_operator.runtime.sharding._metrics import ShardingMetrics
from cronjob_operator.runtime.sharding._plan import (
    Assign,
    Drain,
    Placement,
    bucket_key,
    bucket_owners,
    placement,
    plan,
)
from cronjob_operator.runtime.sharding._ring import Ring
from cronjob_operator.runtime.sharding._selection import OwnedSelection
from cronjob_operator.runtime.sharding._shard import DrainAcknowledger, Shard, ShardLeaseLost

__all__ = [
    "BUCKETS",
    "BUCKET_LABEL",
    "DRAIN_LABEL",
    "GROUP_LABEL",
    "PREVIOUS_ANNOTATION",
    "SHARD_LABEL",
    "Assign",
    "Assigner",
    "Drain",
    "DrainAcknowledger",
    "MemberState",
    "OwnedSelection",
    "Placement",
    "Ring",
    "Shard",
    "ShardLeaseLost",
    "ShardingConfig",
    "ShardingMetrics",
    "attach",
    "bucket_key",
    "bucket_of",
    "bucket_owners",
    "bucket_selector",
    "inherited_labels",
    "member_name",
    "member_state",
    "owned_object_labels",
    "placement",
    "plan",
    "shard_selector",
]


def attach(
    manager: Manager, *, group: str, kind: Kind, owned: tuple[Kind, ...], member: str | None = None
) -> Shard:
    """Make this manager a member of ``group`` sharding ``kind`` (and ``owned``).

    Needs leader election (the assigner runs on the leader, its member Leases sit
    beside the leader Lease, with its timings). Call before anything uses the
    informers of ``kind`` or ``owned``: their caches get the member's label selector.
    Returns the ``Shard``: build the sharded controllers on it instead of the manager.
    """
    election = manager.options.leader_election
    if election is None or manager.elector is None:
        raise ValueError("sharding needs leader election: the assigner runs on the leader")
    config = ShardingConfig.like(election, group=group, kind=kind, owned=owned)
    name = member or member_name(os.environ.get(POD_NAME_ENV) or socket.gethostname())
    metrics = ShardingMetrics(manager.metrics.registry)
    shard = Shard(
        manager.rest,
        manager.cache,
        config,
        member=name,
        metrics=manager.metrics,
        sharding_metrics=metrics,
        controller_options=manager.controller_options,
        component=manager.options.component,
    )
    manager.cache.set_label_selector(kind, shard.selector)
    for follower in owned:
        manager.cache.set_label_selector(follower, shard.owned_selector)
    manager.add(shard)
    manager.add(
        Assigner(
            manager.rest,
            manager.client,
            config,
            identity=manager.elector.identity,
            metrics=metrics,
            namespace=manager.options.namespace,
        )
    )
    return shard
