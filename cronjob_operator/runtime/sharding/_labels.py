"""The label and annotation keys of sharding: the whole protocol between assigner and shards.

* ``GROUP_LABEL`` on each member's Lease: which shard group it belongs to.
* ``SHARD_LABEL`` on each sharded object (and on the objects it owns): the member that
  reconciles it. Each member's informers select on it, so the API server sends each
  member only its share.
* ``DRAIN_LABEL``: the assigner asks the member to give the object up; the member
  acknowledges by removing both labels and recording itself in ``PREVIOUS_ANNOTATION``,
  which tells the assigner whose owned objects to relabel.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PREFIX = "sharding.cronjob-operator.io"
GROUP_LABEL = f"{PREFIX}/group"
SHARD_LABEL = f"{PREFIX}/shard"
DRAIN_LABEL = f"{PREFIX}/drain"
PREVIOUS_ANNOTATION = f"{PREFIX}/previous-shard"


def labels_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """An object's labels (empty when it has none)."""
    return (obj.get("metadata") or {}).get("labels") or {}


def annotations_of(obj: Mapping[str, Any]) -> Mapping[str, str]:
    """An object's annotations (empty when it has none)."""
    return (obj.get("metadata") or {}).get("annotations") or {}


def shard_selector(member: str) -> str:
    """The label selector of ``member``'s informers."""
    return f"{SHARD_LABEL}={member}"


def inherited_labels(owner: Mapping[str, Any]) -> dict[str, str]:
    """The sharding labels an object created for ``owner`` carries: its shard, if any."""
    shard = labels_of(owner).get(SHARD_LABEL)
    return {SHARD_LABEL: shard} if shard else {}
