"""The metrics of sharding, in the manager's registry (one ``ShardingMetrics`` per manager).

``sharding_members`` (live members, as the assigner sees them) and the move counters
and drain times come from the replica that leads; ``sharding_owned_objects`` from each
replica, for its own share.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

_DRAIN_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class ShardingMetrics:
    """Sharding's metrics, registered in ``registry``."""

    def __init__(self, registry: CollectorRegistry | None) -> None:
        self.members = Gauge(
            "sharding_members",
            "Members of the shard group whose Lease is live, as the assigner observes them",
            ["group"],
            registry=registry,
        )
        self.owned = Gauge(
            "sharding_owned_objects",
            "Sharded objects this replica's cache holds (its share), per member",
            ["group", "shard"],
            registry=registry,
        )
        self.moves = Counter(
            "sharding_assignments_total",
            "Objects the assigner labelled with a shard, by reason: new (never assigned), "
            "drained (moved after the old member acknowledged), orphaned (member gone)",
            ["group", "reason"],
            registry=registry,
        )
        self.drains = Counter(
            "sharding_drains_total",
            "Drains the assigner asked for (a live member gives an object up)",
            ["group"],
            registry=registry,
        )
        self.drain_seconds = Histogram(
            "sharding_drain_duration_seconds",
            "From the drain label written to the acknowledged object reassigned, on the "
            "assigner's clock",
            ["group"],
            buckets=_DRAIN_BUCKETS,
            registry=registry,
        )
