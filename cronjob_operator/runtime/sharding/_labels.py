"""The label and annotation keys of sharding: the whole protocol between assigner and shards.

* ``GROUP_LABEL`` on each member's Lease: which shard group it belongs to.
* ``SHARD_LABEL`` on each sharded object: the member that reconciles it. Each member's
  informer of the sharded kind selects on it, so the API server sends each member only
  its share.
* ``BUCKET_LABEL`` on each owned object (a CronJob's Jobs): the bucket of its controller
  owner, one of ``BUCKETS``, from a stable hash of the owner's ``namespace/name``. It is
  written once, when the object is created, and never changes: the ring places whole
  buckets, so a member's owned-object informer selects the buckets of the objects it
  owns (``bucket in (...)``) and a move relabels only the moved object, never what it
  owns.
* ``DRAIN_LABEL``: the assigner asks the member to give the object up; the member
  acknowledges by removing both labels and recording itself in ``PREVIOUS_ANNOTATION``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from cronjob_operator.runtime.sharding._ring import hash64

PREFIX = "sharding.cronjob-operator.io"
GROUP_LABEL = f"{PREFIX}/group"
SHARD_LABEL = f"{PREFIX}/shard"
BUCKET_LABEL = f"{PREFIX}/bucket"
DRAIN_LABEL = f"{PREFIX}/drain"
PREVIOUS_ANNOTATION = f"{PREFIX}/previous-shard"

BUCKETS = 1024
"""How many buckets the objects hash into: the ring's unit of placement. Enough that
each of a few members gets a near-even share of a large fleet (the buckets' own spread
is about 1/sqrt(BUCKETS / members) of a share), few enough that a member's selector
(about BUCKETS / members values) stays a short query string."""

NO_BUCKET = "none"
"""The selector value of a member that owns no bucket yet: matches nothing."""


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """An object's labels (empty when it has none)."""
    return (obj.get("metadata") or {}).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """An object's annotations (empty when it has none)."""
    return (obj.get("metadata") or {}).get("annotations") or {}


def shard_selector(member: str) -> str:
    """The label selector of ``member``'s informer of the sharded kind."""
    return f"{SHARD_LABEL}={member}"


def bucket_of(namespace: str, name: str) -> int:
    """The bucket of the sharded object ``namespace/name`` (and of everything it owns)."""
    return hash64(f"{namespace}/{name}") % BUCKETS


def bucket_of_object(obj: Mapping[str, Any]) -> int:
    """The bucket of a sharded object."""
    metadata = obj.get("metadata") or {}
    return bucket_of(str(metadata.get("namespace") or ""), str(metadata.get("name") or ""))


def bucket_selector(buckets: Iterable[int]) -> str:
    """The label selector of a member's owned-object informers over ``buckets``."""
    values = ",".join(str(bucket) for bucket in sorted(set(buckets))) or NO_BUCKET
    return f"{BUCKET_LABEL} in ({values})"


def inherited_labels(owner: Mapping[str, Any]) -> dict[str, str]:
    """The sharding labels an object created for ``owner`` carries: the owner's bucket,
    when the owner is sharded (it carries a shard label)."""
    if not labels_of(owner).get(SHARD_LABEL):
        return {}
    return {BUCKET_LABEL: str(bucket_of_object(owner))}


def owned_object_labels(labels: Mapping[str, str], owner: Mapping[str, Any]) -> dict[str, str]:
    """The labels of an object created for ``owner`` from a template with ``labels``: the
    template's without any sharding key (only the sharding code sets those: a CronJob's
    author cannot give its Jobs a bucket through ``jobTemplate``), plus ``inherited_labels``."""
    kept = {key: value for key, value in labels.items() if not key.startswith(f"{PREFIX}/")}
    return {**kept, **inherited_labels(owner)}
