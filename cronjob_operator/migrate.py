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

An object the API server refuses to write back (``REFUSALS``: an admission webhook or
policy denies it, it fails validation) is skipped, named with the server's reason
(``Skipped``), and the walk goes on. It is still stored in the old version, so
``storedVersions`` is then left as it is, and also by a later run resumed with
``--continue`` (which cannot see the skip): the first skip marks the CRD with
``SKIPPED_ANNOTATION``, which only a run from the first page clears.
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
from cronjob_operator.runtime.serving import shortened

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "VERSIONS",
    "MigrationError",
    "MigrationResult",
    "Skipped",
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
STORAGE_SETTLE: Final = 120.0
"""Seconds after discovery reports the new storage version in which a skipped no-op
write is sent again. The API server's CRD handler swaps a CRD's storage on its own
informer event, apart from the discovery controller's: under load it was seen encoding
with the old version for tens of seconds after discovery changed. (A run that once left
60 of 100 objects as v1, taken for a longer lag, was the test's first page holding 60
CronJobs of another namespace.) A no-op write to an object stored as that old version is
then skipped, or (when the bytes differ) written in the old version again; the objects
written before the window ends are written once more after it."""
SETTLE_RETRY_INTERVAL: Final = 0.5
MAX_CONFLICTS: Final = 10
"""Re-reads of one object that keeps changing before the walk gives up on it."""
REFUSALS: Final = (errors.BadRequest, errors.Forbidden, errors.Invalid)
"""The API server's answers that refuse one object's write (the object is skipped);
any other failure (unreachable, unauthorized, a webhook down) stops the walk."""
SKIPPED_ANNOTATION: Final = f"{batch_v1.CRONJOB.group}/migrate-storage-skipped"
"""On the CRD while a run since the last walk from the first page skipped an object: its
value is the version that run moved to. No run trims ``storedVersions`` while it is set."""
REASON_LIMIT: Final = 1000
"""Characters of the API server's reason that a skipped object's line shows."""


class MigrationError(Exception):
    """The move cannot go on; the message names the object and what to do."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """An object the API server refused to write back, and the reason it gave."""

    namespace: str
    name: str
    reason: str

    def __str__(self) -> str:
        return f"CronJob {self.namespace}/{self.name}: {self.reason}"


@dataclass(frozen=True, slots=True)
class MigrationResult:
    """What one run did: objects rewritten, the token to resume from (None: the last page
    was reached), the objects skipped, and whether ``storedVersions`` was trimmed."""

    migrated: int
    continue_token: str | None
    seconds: float
    skipped: tuple[Skipped, ...] = ()
    trimmed: bool = False


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


def _mark_skipped(rest: RestClient, to: str | None) -> None:
    """Set (``to``) or clear (None) ``SKIPPED_ANNOTATION`` on the CRD."""
    body = {"metadata": {"annotations": {SKIPPED_ANNOTATION: to}}}
    rest.request("PATCH", CRD_PATH, body=body, content_type=PatchType.MERGE)


def _skipped_earlier(rest: RestClient) -> bool:
    annotations = _crd(rest)["metadata"].get("annotations") or {}
    return SKIPPED_ANNOTATION in annotations


class _Walk:
    """One run's rewrites: counts them, and skips (and reports) each refused object."""

    def __init__(
        self, rest: RestClient, to: str, on_skip: Callable[[Skipped], None], settle: float
    ) -> None:
        self.rest, self.to, self.on_skip, self.settle = rest, to, on_skip, settle
        self.kind = VERSIONS[to]
        self.migrated = 0
        self.skipped: list[Skipped] = []
        self.early: list[dict[str, Any]] = []

    def write_back(self, obj: dict[str, Any]) -> None:
        """Rewrite ``obj``; remember it if written before the switch settled."""
        if self._rewritten(obj, self.settle):
            self.migrated += 1
            if time.monotonic() < self.settle:
                self.early.append(obj)

    def write_early_ones_again(self) -> None:
        """Once the switch has settled, write again each object first written before:
        that write may have reached the old storage and changed the bytes (and so not
        been a skip). Each is sent as first read: the Conflict re-reads it."""
        time.sleep(max(0.0, self.settle - time.monotonic()) if self.early else 0.0)
        for obj in self.early:
            self._rewritten(obj, 0.0)
        self.early = []

    def _rewritten(self, obj: dict[str, Any], settle: float) -> bool:
        try:
            return rewrite(self.rest, self.kind, obj, retry_skipped_until=settle)
        except REFUSALS as refusal:
            self._skip(obj, refusal)
            return False

    def _skip(self, obj: dict[str, Any], refusal: errors.ApiError) -> None:
        metadata = obj["metadata"]
        skipped = Skipped(
            metadata["namespace"], metadata["name"], shortened(str(refusal), REASON_LIMIT)
        )
        if not self.skipped:
            _mark_skipped(self.rest, self.to)  # before going on: a resumed run must see it
        self.skipped.append(skipped)
        self.on_skip(skipped)

    def result(self, started: float, token: str | None, *, trimmed: bool) -> MigrationResult:
        return MigrationResult(
            self.migrated, token, time.monotonic() - started, tuple(self.skipped), trimmed
        )


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
    on_skip: Callable[[Skipped], None] = lambda skipped: None,
) -> MigrationResult:
    """Move storage to ``to``; stop after ``max_pages`` pages (None: all) with a token.
    ``storedVersions`` is trimmed after the last page unless an object was skipped, by
    this run or by one before it since the last run from the first page."""
    started = time.monotonic()
    switch_storage(rest, to)
    if continue_token is None and _skipped_earlier(rest):
        _mark_skipped(rest, None)  # this walk sees every object again
    walk = _Walk(rest, to, on_skip, time.monotonic() + STORAGE_SETTLE)
    for pages, (items, token) in enumerate(_pages(rest, walk.kind, page_size, continue_token), 1):
        for obj in items:
            walk.write_back(obj)
        on_page(walk.migrated, token)
        if token is not None and max_pages is not None and pages >= max_pages:
            walk.write_early_ones_again()
            return walk.result(started, token, trimmed=False)
    walk.write_early_ones_again()
    if walk.skipped or _skipped_earlier(rest):
        return walk.result(started, None, trimmed=False)
    trim_stored_versions(rest, to)
    return walk.result(started, None, trimmed=True)
