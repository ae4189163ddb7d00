"""What a shard group is: its name, the kinds it shards, where and how its Leases live."""

from __future__ import annotations

from dataclasses import dataclass

from cronjob_operator.runtime.kinds import Kind
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.sharding._ring import DEFAULT_VIRTUAL_NODES


@dataclass(frozen=True, slots=True)
class ShardingConfig:
    """One shard group: ``kind`` is sharded, ``owned`` kinds follow their controller owner.

    The member Leases live in ``namespace`` and use the leader election's timings, so
    the same rule (expiry observed on the observer's own clock, writes fenced at the
    renew deadline) covers both.
    """

    group: str
    kind: Kind
    owned: tuple[Kind, ...]
    namespace: str
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    virtual_nodes: int = DEFAULT_VIRTUAL_NODES
    assign_workers: int = 8
    """Threads the assigner sends one round's writes from (each object's on one)."""

    def __post_init__(self) -> None:
        if not self.group or len(self.group) > 63:
            raise ValueError("a shard group needs a name of 1 to 63 characters (a label value)")

    @classmethod
    def like(
        cls, election: LeaderElectionConfig, *, group: str, kind: Kind, owned: tuple[Kind, ...]
    ) -> ShardingConfig:
        """A group whose Leases sit beside the leader Lease, with the same timings."""
        return cls(
            group=group,
            kind=kind,
            owned=owned,
            namespace=election.namespace,
            lease_duration=election.lease_duration,
            renew_deadline=election.renew_deadline,
            retry_period=election.retry_period,
        )

    def member_lease(self, member: str) -> LeaderElectionConfig:
        """The leader election config that keeps ``member``'s own Lease."""
        return LeaderElectionConfig(
            name=member,
            namespace=self.namespace,
            identity=member,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
            release_on_cancel=True,
        )
