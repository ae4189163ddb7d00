"""What the assigner does next, decided from the members' states and the objects' labels.

A pure function (``plan``) of the objects' sharding labels and each member's
``MemberState``: the runnable in ``_assigner`` reads, calls it and writes. Each object
belongs to the owner of its bucket (``_labels.bucket_of``: whole buckets move, so the
objects it owns, labelled with the bucket, follow without a write), which is where the
ring of LIVE members places that bucket among all ``BUCKETS`` under bounded loads
(``bucket_owners``, ``Ring.place``). Then:

* no shard label (new, or drained and acknowledged): ``Assign`` it to its bucket's owner;
* on a GONE member, or on one that has no Lease at all: ``Assign`` at once, without a
  drain (that member can write nothing any more: see ``_membership``);
* on an EXPIRED member: nothing yet (the Lease is taken over first);
* on a LIVE member that is not its bucket's owner: ``Drain``, unless already draining.

Nothing is assigned while no member is LIVE.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cronjob_operator.runtime.sharding._labels import (
    BUCKETS,
    DRAIN_LABEL,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL,
    annotations_of,
    bucket_of,
    labels_of,
)
from cronjob_operator.runtime.sharding._membership import MemberState
from cronjob_operator.runtime.sharding._ring import Ring


@dataclass(frozen=True, slots=True)
class Placement:
    """The sharding-relevant facts of one object, as the assigner's cache has them."""

    namespace: str
    name: str
    uid: str
    resource_version: str
    shard: str | None = None
    draining: bool = False
    previous: str | None = None

    @property
    def key(self) -> str:
        """``<namespace>/<name>``."""
        return f"{self.namespace}/{self.name}"

    @property
    def bucket(self) -> int:
        """The object's bucket, which the ring places."""
        return bucket_of(self.namespace, self.name)


@dataclass(frozen=True, slots=True)
class Assign:
    """Label ``target`` with ``shard``, after giving the owned objects that carry no
    bucket label yet (made before sharding was on) its bucket."""

    target: Placement
    shard: str
    reason: str
    """``new`` (never assigned), ``drained`` (acknowledged) or ``orphaned`` (member gone)."""


@dataclass(frozen=True, slots=True)
class Drain:
    """Ask the object's current member to give it up."""

    target: Placement


def placement(obj: Mapping[str, Any]) -> Placement:
    """The ``Placement`` of an object."""
    metadata = obj.get("metadata") or {}
    labels = labels_of(obj)
    return Placement(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        uid=str(metadata.get("uid") or ""),
        resource_version=str(metadata.get("resourceVersion") or ""),
        shard=labels.get(SHARD_LABEL) or None,
        draining=DRAIN_LABEL in labels,
        previous=annotations_of(obj).get(PREVIOUS_ANNOTATION) or None,
    )


def bucket_key(bucket: int) -> str:
    """A bucket's key on the ring."""
    return f"bucket-{bucket}"


BUCKET_KEYS = tuple(bucket_key(bucket) for bucket in range(BUCKETS))
"""Every bucket's key on the ring, in bucket order."""


def bucket_owners(ring: Ring) -> list[str]:
    """Every bucket's owner, indexed by bucket: the ring places all ``BUCKETS``, in
    order, with bounded loads; empty when the ring has no member."""
    return ring.place(BUCKET_KEYS)


def plan(
    placements: Iterable[Placement], members: Mapping[str, MemberState], ring: Ring
) -> list[Assign | Drain]:
    """The writes that bring every object to its bucket's owner (module doc)."""
    actions: list[Assign | Drain] = []
    owners = bucket_owners(ring)
    if not owners:
        return actions
    for target in placements:
        owner = owners[target.bucket]
        if target.shard is None:
            reason = "drained" if target.previous else "new"
            actions.append(Assign(target, owner, reason))
            continue
        state = members.get(target.shard, MemberState.GONE)
        if state is MemberState.GONE:
            actions.append(Assign(target, owner, "orphaned"))
        elif state is MemberState.LIVE and target.shard != owner and not target.draining:
            actions.append(Drain(target))
    return actions
