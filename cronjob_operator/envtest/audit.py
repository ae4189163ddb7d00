"""The API server's audit log, for tests that must say which writes reached the server.

Some promises can only be checked at the server: "a deposed leader writes nothing after
the new one acquired the Lease", "this POST reached the server once". A plane started
with ``ControlPlane(audit=True)`` runs kube-apiserver with ``POLICY``: every write
(create, update, patch, delete, deletecollection) logged once, at Metadata level (who,
what, when, the response code; no bodies), when its response is complete; reads are not
logged. The log is JSON lines in the state directory (``ControlPlane.audit_log``),
written before the response is sent (the log backend's default blocking mode).

``read_events`` parses it into ``AuditEvent``s; ``writes`` filters them by user agent
and time. A process is told apart by its user agent: the operator's names its identity.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["POLICY", "WRITE_VERBS", "AuditEvent", "apiserver_flags", "read_events", "writes"]

WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")
POLICY: dict[str, Any] = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [{"level": "Metadata", "verbs": list(WRITE_VERBS)}, {"level": "None"}],
}
"""Writes at Metadata level, once each (at ResponseComplete); nothing else."""


def apiserver_flags(state_dir: Path) -> list[str]:
    """Write the policy into ``state_dir`` and return kube-apiserver's audit flags."""
    policy = state_dir / "audit-policy.json"
    policy.write_text(json.dumps(POLICY))
    return [
        f"--audit-policy-file={policy}",
        f"--audit-log-path={log_path(state_dir)}",
        "--audit-log-format=json",
        "--audit-log-maxbackup=0",
    ]


def log_path(state_dir: Path) -> Path:
    """Where the plane in ``state_dir`` writes its audit log."""
    return state_dir / "audit.log"


@dataclass(frozen=True)
class AuditEvent:
    """One logged request: its verb, target, caller, response code and arrival time."""

    verb: str
    resource: str
    namespace: str
    name: str
    subresource: str
    user_agent: str
    username: str
    code: int
    received: datetime
    """``requestReceivedTimestamp``: when the server got the request (its own clock)."""

    @property
    def target(self) -> str:
        """``resource[/subresource] namespace/name``, for messages."""
        sub = f"/{self.subresource}" if self.subresource else ""
        return f"{self.resource}{sub} {self.namespace}/{self.name}"


def read_events(path: Path) -> list[AuditEvent]:
    """Every complete event logged in ``path`` so far (none if there is no log yet)."""
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    events = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:  # the last line may still be being written
            continue
        events.append(_event(entry))
    return events


def writes(
    events: Iterable[AuditEvent],
    *,
    user_agents: Sequence[str] = (),
    after: datetime | None = None,
    resource: str | None = None,
) -> list[AuditEvent]:
    """The write events whose user agent contains one of ``user_agents`` (any, when
    empty), received after ``after``, on ``resource`` (plural) when given."""
    return [
        event
        for event in events
        if event.verb in WRITE_VERBS
        and (not user_agents or any(agent in event.user_agent for agent in user_agents))
        and (after is None or event.received > after)
        and (resource is None or event.resource == resource)
    ]


def _event(entry: dict[str, Any]) -> AuditEvent:
    ref = entry.get("objectRef") or {}
    return AuditEvent(
        verb=str(entry.get("verb", "")),
        resource=str(ref.get("resource", "")),
        namespace=str(ref.get("namespace", "")),
        name=str(ref.get("name", "")),
        subresource=str(ref.get("subresource", "")),
        user_agent=str(entry.get("userAgent", "")),
        username=str((entry.get("user") or {}).get("username", "")),
        code=int((entry.get("responseStatus") or {}).get("code", 0)),
        received=datetime.fromisoformat(entry["requestReceivedTimestamp"]),
    )
