"""An in-memory stand-in for the CronJob reconciler's client and event recorder.

Just enough API semantics for the reconcile rules to be unit-tested with an injected
clock: objects keyed by (kind, namespace, name), uids and generations assigned on create,
AlreadyExists/NotFound, the owner index, and a count of status writes (the "no write on
a no-op reconcile" rule). Jobs are finished by the test (``finish``), as kwok does on the
local control plane.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers import cronjob
from cronjob_operator.runtime import errors, objects
from cronjob_operator.runtime.conditions import rfc3339
from cronjob_operator.runtime.kinds import Kind

Key = tuple[str, str, str]


def _key(kind: Kind, namespace: str | None, name: str) -> Key:
    return (kind.plural, namespace or "", name)


def _error(cls: type[errors.ApiError], code: int, message: str) -> errors.ApiError:
    return cls({"message": message}, code=code)


@dataclass
class FakeCluster:
    """Objects, the events recorded about them, and how many status writes happened."""

    store: dict[Key, dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    status_writes: int = 0
    _uids: Any = field(default_factory=lambda: itertools.count(1))

    @property
    def live(self) -> FakeCluster:
        return self

    # --- the client ---------------------------------------------------------------
    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        try:
            return objects.freeze(copy.deepcopy(self.store[_key(kind, namespace, name)]))
        except KeyError:
            raise _error(errors.NotFound, 404, f"{name} not found") from None

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
        label_selector: Any = None,
    ) -> list[objects.Obj]:
        found = []
        for (plural, ns, _), obj in self.store.items():
            if plural != kind.plural or (namespace and ns != namespace):
                continue
            owner = (matching_fields or {}).get(cronjob.JOB_OWNER_INDEX)
            if owner is not None and cronjob.job_owner_index(obj) != [owner]:
                continue
            found.append(objects.freeze(copy.deepcopy(obj)))
        return found

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        metadata = obj["metadata"]
        key = _key(kind, metadata.get("namespace"), metadata["name"])
        if key in self.store:
            raise _error(errors.AlreadyExists, 409, f"{metadata['name']} exists")
        stored = copy.deepcopy(dict(obj))
        stored["metadata"].setdefault("uid", f"uid-{next(self._uids)}")
        stored["metadata"].setdefault("generation", 1)
        stored["metadata"].setdefault("resourceVersion", "1")
        self.store[key] = stored
        return copy.deepcopy(stored)

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        metadata = obj["metadata"]
        stored = self.store[_key(kind, metadata.get("namespace"), metadata["name"])]
        stored["status"] = copy.deepcopy(dict(obj["status"]))
        self.status_writes += 1
        return copy.deepcopy(stored)

    def delete(self, kind: Kind, name: str, *, namespace: str | None = None, **_: Any) -> None:
        if self.store.pop(_key(kind, namespace, name), None) is None:
            raise _error(errors.NotFound, 404, f"{name} not found")

    # --- the recorder -------------------------------------------------------------
    def event(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        self.events.append((type_, reason, message))

    # --- test helpers -------------------------------------------------------------
    def reasons(self) -> list[str]:
        return [reason for _, reason, _ in self.events]

    def cronjob(self, name: str, namespace: str = "ns") -> dict[str, Any]:
        return self.store[_key(CRONJOB, namespace, name)]

    def edit_spec(self, name: str, **changes: Any) -> None:
        """A user's spec edit: the generation moves on."""
        obj = self.cronjob(name)
        obj["spec"].update(changes)
        obj["metadata"]["generation"] += 1

    def jobs(self, namespace: str = "ns") -> dict[str, dict[str, Any]]:
        return {name: obj for (plural, ns, name), obj in self.store.items() if plural == "jobs"}

    def finish(self, job_name: str, state: str, at: datetime, namespace: str = "ns") -> None:
        """Mark a Job Complete or Failed at ``at``, as the Job controller would."""
        job = self.store[("jobs", namespace, job_name)]
        status = job.setdefault("status", {})
        status["startTime"] = rfc3339(at)
        status["conditions"] = [
            {"type": state, "status": "True", "lastTransitionTime": rfc3339(at)}
        ]
        if state == "Complete":
            status["completionTime"] = rfc3339(at)
