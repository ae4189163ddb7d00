"""Move the CronJob CRD's stored version (v1 <-> v2) with objects present.

Why a module of its own: a storage move is an operator's one-off task, not the manager's
work. It does what kube-storage-version-migrator does for one resource: flip the CRD's
``storage`` flag, wait until the API server encodes with the new version (discovery's
``storageVersionHash``, then each write's own answer: see ``STORAGE_SETTLE``), rewrite
every object with a no-op update (the object PUT back as read, with its resourceVersion;
a Conflict re-reads and retries, a NotFound means it was deleted meanwhile), page by
page with continue tokens, and only then trim ``status.storedVersions`` to the new
version. The API server skips a write only when the
newly encoded object equals the stored bytes; encoded in the new storage version it
differs, so each PUT is written. The spec does not change, so ``metadata.generation`` does
not move and the controller starts no run.

Resumable: each page prints its continue token; ``--continue`` starts from it. A token
older than etcd's compaction (about 5 minutes) is gone: the walk then restarts from the
first page, which only rewrites some objects twice.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.runtime import RestClient, errors
from cronjob_operator.runtime.client import PatchType
from cronjob_operator.runtime.kinds import Kind

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "VERSIONS",
    "MigrationError",
    "MigrationResult",
    "migrate_storage",
    "storage_version_hash",
]

VERSIONS: Final = {kind.version: kind for kind in (batch_v1.CRONJOB, batch_v2.CRONJOB)}
"""The CronJob's versions by name: the storage move's possible targets."""

CRD_PATH: Final = (
    f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
    f"{batch_v1.CRONJOB.plural}.{batch_v1.CRONJOB.group}"
)
DEFAULT_PAGE_SIZE: Final = 500
"""Objects per LIST page: the migrator's chunk size."""
STORAGE_SWITCH_TIMEOUT: Final = 60.0
"""Seconds to wait for discovery to report the new storage version after the flip."""
STORAGE_SETTLE: Final = 60.0
"""Seconds after discovery reports the new storage version in which a skipped no-op
write is sent again. The API server's CRD handler swaps a CRD's storage on its own
informer event, apart from the discovery controller's: under load it was seen encoding
with the old version for tens of seconds after discovery changed. A no-op write to an
object stored as that old version is then skipped, or (when the bytes differ) written in
the old version again; the objects written before the window ends are written once more
after it."""
SETTLE_RETRY_INTERVAL: Final = 0.5
MAX_CONFLICTS: Final = 10
"""Re-reads of one object that keeps changing before the walk gives up on it."""


class MigrationError(Exception):
    """The move cannot go on; the message names the object and what to do."""


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """What one run did: objects rewritten, and the token to resume from (None: all done)."""

    migrated: int
    continue_token: str | None
    seconds: float


def storage_version_hash(group: str, version: str, kind: str) -> str:
    """Discovery's ``storageVersionHash`` for a storage version (apiserver's algorithm)."""
    digest = hashlib.sha256(f"{group}/{version}/{kind}".encode()).digest()
    return base64.b64encode(digest[:8]).decode()


def _crd(rest: RestClient) -> dict[str, Any]:
    crd: dict[str, Any] = rest.request("GET", CRD_PATH)
    return crd


def _storage_patch(crd: dict[str, Any], to: str) -> list[dict[str, Any]]:
    """A JSON patch making ``to`` the only storage version, or [] when it already is."""
    versions = crd["spec"]["versions"]
    names = [v["name"] for v in versions]
    if to not in names:
        raise MigrationError(f"CRD {crd['metadata']['name']} has no version {to!r}: it has {names}")
    patch: list[dict[str, Any]] = [
        {
            "op": "test",
            "path": "/metadata/resourceVersion",
            "value": crd["metadata"]["resourceVersion"],
        }
    ]
    for index, version in enumerate(versions):
        if not version.get("served", False) and version["name"] == to:
            raise MigrationError(
                f"CRD {crd['metadata']['name']}: version {to} is not served; serve it "
                "(spec.versions[].served, with the conversion webhook) before moving storage"
            )
        wanted = version["name"] == to
        if version.get("storage", False) != wanted:
            patch.append(
                {"op": "replace", "path": f"/spec/versions/{index}/storage", "value": wanted}
            )
    return patch if len(patch) > 1 else []


def _discovered_hash(rest: RestClient, kind: Kind) -> str | None:
    listing = rest.request("GET", f"/apis/{kind.api_version}")
    for resource in listing.get("resources", []):
        if resource["name"] == kind.plural:
            found: str | None = resource.get("storageVersionHash")
            return found
    return None


def switch_storage(rest: RestClient, to: str, *, timeout: float = STORAGE_SWITCH_TIMEOUT) -> None:
    """Make ``to`` the CRD's storage version and wait until discovery reports it."""
    patch = _storage_patch(_crd(rest), to)
    if patch:
        rest.request("PATCH", CRD_PATH, body=patch, content_type=PatchType.JSON)
    kind = VERSIONS[to]
    expected = storage_version_hash(kind.group, to, kind.kind)
    deadline = time.monotonic() + timeout
    while _discovered_hash(rest, kind) != expected:
        if time.monotonic() > deadline:
            raise MigrationError(
                f"discovery of {kind.plural}.{kind.group}/{to} did not report storage version "
                f"{to} within {timeout:.0f}s; rerun the command"
            )
        time.sleep(0.2)


def _pages(
    rest: RestClient, kind: Kind, page_size: int, token: str | None
) -> Iterator[tuple[list[dict[str, Any]], str | None]]:
    """Each LIST page of every namespace's CronJobs as ``kind``, and the next token."""
    path = kind.collection_path()
    while True:
        params: dict[str, Any] = {"limit": page_size}
        if token:
            params["continue"] = token
        try:
            page = rest.request("GET", path, params=params)
        except errors.Gone:
            if token is None:
                raise
            token = None  # expired: start over; a second rewrite is harmless
            continue
        token = page["metadata"].get("continue") or None
        yield page["items"], token
        if token is None:
            return


def rewrite(
    rest: RestClient, kind: Kind, obj: dict[str, Any], *, retry_skipped_until: float = 0.0
) -> bool:
    """PUT ``obj`` back as read; True if written, False if it was deleted meanwhile.

    A PUT the API server skipped (the resourceVersion came back unchanged: the encoded
    object equals the stored bytes) is sent again until ``retry_skipped_until``
    (``time.monotonic``): shortly after a storage switch the server may still encode with
    the old version (see ``STORAGE_SETTLE``). After it, a skip means the object is
    already stored as the target."""
    path = kind.object_path(obj["metadata"]["namespace"], obj["metadata"]["name"])
    conflicts = 0
    while conflicts < MAX_CONFLICTS:
        try:
            written = rest.request("PUT", path, body=obj)
        except errors.NotFound:
            return False
        except errors.Conflict:
            conflicts += 1
            try:
                obj = rest.request("GET", path)
            except errors.NotFound:
                return False
            continue
        skipped = _resource_version(written) == _resource_version(obj)
        if not skipped or time.monotonic() >= retry_skipped_until:
            return True
        time.sleep(SETTLE_RETRY_INTERVAL)
    raise MigrationError(
        f"CronJob {obj['metadata']['namespace']}/{obj['metadata']['name']} changed "
        f"{MAX_CONFLICTS} times while being rewritten; rerun the command to retry it"
    )


def _resource_version(obj: dict[str, Any]) -> str:
    return str(obj["metadata"].get("resourceVersion", ""))


def trim_stored_versions(rest: RestClient, to: str) -> None:
    """Set the CRD's ``status.storedVersions`` to ``[to]`` (every object is stored as it)."""
    rest.request(
        "PATCH",
        f"{CRD_PATH}/status",
        body={"status": {"storedVersions": [to]}},
        content_type=PatchType.MERGE,
    )


def migrate_storage(
    rest: RestClient,
    to: str,
    *,
    page_size: int = DEFAULT_PAGE_SIZE,
    continue_token: str | None = None,
    max_pages: int | None = None,
    on_page: Callable[[int, str | None], None] = lambda migrated, token: None,
) -> MigrationResult:
    """Move storage to ``to``; stop after ``max_pages`` pages (None: all) with a token."""
    started = time.monotonic()
    switch_storage(rest, to)
    settle = time.monotonic() + STORAGE_SETTLE
    migrated = 0
    kind = VERSIONS[to]
    early: list[dict[str, Any]] = []
    for pages, (items, token) in enumerate(_pages(rest, kind, page_size, continue_token), 1):
        for obj in items:
            if rewrite(rest, kind, obj, retry_skipped_until=settle):
                migrated += 1
                if time.monotonic() < settle:
                    early.append(obj)
        on_page(migrated, token)
        if token is not None and max_pages is not None and pages >= max_pages:
            _rewrite_again(rest, kind, early, settle)
            return MigrationResult(migrated, token, time.monotonic() - started)
    _rewrite_again(rest, kind, early, settle)
    trim_stored_versions(rest, to)
    return MigrationResult(migrated, None, time.monotonic() - started)


def _rewrite_again(
    rest: RestClient, kind: Kind, early: list[dict[str, Any]], settle: float
) -> None:
    """Once the switch has settled, write again each object first written before: that
    write may have reached the old storage and changed the bytes (and so not been a
    skip). Each is sent as first read: the Conflict re-reads it."""
    time.sleep(max(0.0, settle - time.monotonic()) if early else 0.0)
    for obj in early:
        rewrite(rest, kind, obj)
