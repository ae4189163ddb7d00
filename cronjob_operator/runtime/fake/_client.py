"""Test doubles for reconcilers: an in-memory client, an event recorder and a clock.

controller-runtime's ``fake.NewClientBuilder()`` for this runtime. ``FakeClient`` has the
interface reconcilers use (``Reader`` reads, ``live`` reads, writes, status writes,
``index_field``) and keeps the API server's rules, so a reconcile tested on it behaves
the same on a cluster:

* ``resourceVersion`` is bumped on every change (never on a no-op write); an update or
  patch carrying a stale one raises ``errors.Conflict``; one without is unconditional.
* create: ``AlreadyExists`` for a taken name, ``Invalid`` without a name or
  ``generateName`` (which gets a five-character suffix), ``BadRequest`` with a
  ``resourceVersion``; sets ``uid``, ``creationTimestamp`` (from the injected clock) and
  ``generation`` 1; the status is dropped for kinds with a status subresource.
* The status subresource: ``update``/``patch`` keep the stored status, ``update_status``/
  ``patch_status`` change only the status; ``generation`` moves only when something
  outside ``metadata`` and ``status`` changed. Kinds without one (ConfigMap, Secret,
  Event, Lease, Namespace) keep their whole body on update and 404 on a status write.
* delete: a ``uid`` precondition that does not match raises ``Conflict``; an object with
  finalizers only gets ``deletionTimestamp`` and goes when an update removes the last
  one (no new finalizer may be added meanwhile). Garbage collection is synchronous:
  with ``Background`` (the default; Jobs default to ``Orphan`` as on the real API) or
  ``Foreground`` dependents whose owners are all gone are deleted in turn, dependents
  with another live owner lose only the reference; ``Orphan`` removes the reference.
* Reads are the cache's own code (``cache.lookup`` for get, ``cache.select`` for list,
  field indexes included): ``matching_fields`` on a field without
  ``with_index``/``index_field`` raises ``UnindexedFieldError``.
* Server-side apply (``apply``/``apply_status``, logged as patches): field owners per
  manager, removal of fields a manager stops applying, ``Conflict`` on another
  manager's field unless forced; lists are atomic and only apply managers own fields
  (``_apply`` says where this model is smaller than the server's).
* Reads return frozen objects, as the cache does. ``live`` is the same store: the fake
  has no cache lag. ``list_metadata`` returns each object's apiVersion, kind and
  metadata, as the server's ``PartialObjectMetadata``, and is logged as a list whose
  body has ``metadata_only``.

Not modelled: admission and schema validation, defaulting, version conversion (each
``Kind`` is its own store), watches, and strategic merge patch (``NotImplementedError``).
``writes`` logs every write call and ``reads`` every get and list (``Action``), in order,
refused ones included; ``prepend_reactor`` makes a call, read or write, fail with the
error a test chooses, as client-go's fake reactors and controller-runtime's interceptor
funcs do. ``FakeRecorder`` keeps the events a reconciler records. The clock that moves
only when told is ``clock.FakeClock``; the fake client's own starts at ``DEFAULT_START``
unless ``with_clock`` gives it another.
"""

from __future__ import annotations

import builtins
import itertools
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from cronjob_operator.runtime import errors, kinds, objects
from cronjob_operator.runtime.cache import (
    FieldIndexFunc,
    Store,
    add_field_index,
    lookup,
    parse_selector,
    select,
    store_key,
)
from cronjob_operator.runtime.client import (
    ClientInterface,
    PatchType,
    Propagation,
    canonical_json,
)
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controllerutil import (
    ApplyConflict,
    Ownership,
    apply_configuration,
    rfc3339,
)
from cronjob_operator.runtime.events import Recorder
from cronjob_operator.runtime.kinds import Kind

DEFAULT_START = datetime(2026, 1, 1, tzinfo=UTC)
"""Where the fake client's clock starts unless told otherwise: fixed, so output is stable."""

NO_STATUS_SUBRESOURCE = frozenset(
    {kinds.CONFIG_MAP, kinds.SECRET, kinds.EVENT, kinds.LEASE, kinds.NAMESPACE}
)
"""Built-in kinds served without a status subresource."""

_ORPHAN_BY_DEFAULT = frozenset({kinds.JOB})
"""Kinds whose REST delete orphans dependents unless told otherwise (batch/v1 Jobs)."""

_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters the API server draws generateName suffixes from."""


@dataclass(frozen=True, slots=True)
class RecordedEvent:
    """One event a reconciler recorded, and the object it is about."""

    kind: str
    namespace: str
    name: str
    type: str
    reason: str
    message: str


class FakeRecorder:
    """An ``EventRecorder`` stand-in that keeps every event in ``events``, in order."""

    def __init__(self) -> None:
        self.events: list[RecordedEvent] = []
        self._lock = threading.Lock()

    def event(self, obj: objects.Obj, type_: str, reason: str, message: str) -> None:
        """Remember the event (the real recorder never raises either)."""
        recorded = RecordedEvent(
            str(obj.get("kind") or ""),
            objects.namespace_of(obj),
            objects.name_of(obj),
            type_,
            reason,
            message,
        )
        with self._lock:
            self.events.append(recorded)

    def reasons(self) -> list[str]:
        """The reasons recorded so far, in order."""
        with self._lock:
            return [event.reason for event in self.events]

    def clear(self) -> None:
        """Forget the events recorded so far."""
        with self._lock:
            self.events.clear()


@dataclass(frozen=True, slots=True)
class Action:
    """One call: its verb (get, list, create, update, patch, delete), target and body.

    A list has no name; its body holds the options given (``matching_fields``,
    ``label_selector``). A delete's body is its propagation policy.
    """

    verb: str
    kind: Kind
    namespace: str
    name: str
    subresource: str = ""
    body: Any = None


Reaction = Callable[[Action], BaseException | None]
"""Returns the error a call should raise instead of happening, or None to let it happen."""

_READ_VERBS = frozenset({"get", "list"})
"""The verbs logged in ``FakeClient.reads``; every other verb is a write."""


@dataclass
class _Reactor:
    verb: str
    kind: Kind | None
    reaction: Reaction


def _status(
    reason: str, code: int, kind: Kind, name: str, message: str, **details: Any
) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "reason": reason,
        "message": message,
        "details": {"name": name, "group": kind.group, "kind": kind.plural, **details},
        "code": code,
    }


def _resource(kind: Kind, name: str) -> str:
    group = f".{kind.group}" if kind.group else ""
    return f'{kind.plural}{group} "{name}"'


def _conflict(kind: Kind, name: str, why: str) -> errors.Conflict:
    message = f"Operation cannot be fulfilled on {_resource(kind, name)}: {why}"
    return errors.Conflict(_status("Conflict", 409, kind, name, message), code=409)


def _stale(kind: Kind, name: str) -> errors.Conflict:
    return _conflict(
        kind,
        name,
        "the object has been modified; please apply your changes to the latest version "
        "and try again",
    )


def _invalid(kind: Kind, name: str, field_path: str, detail: str) -> errors.Invalid:
    message = f'{kind.kind}{"." + kind.group if kind.group else ""} "{name}" is invalid: '
    message += f"{field_path}: {detail}"
    cause = {"reason": "FieldValueInvalid", "message": detail, "field": field_path}
    status = _status("Invalid", 422, kind, name, message, causes=[cause])
    return errors.Invalid(status, code=422)


def apply_merge_patch(target: Any, patch: Any) -> Any:
    """Apply an RFC 7386 JSON merge patch: maps merge, ``None`` removes, others replace.

    The server side of ``controllerutil.merge_patch``, which computes such a patch.
    """
    if not isinstance(patch, Mapping):
        return objects.thaw(patch)
    merged = objects.thaw(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = apply_merge_patch(merged.get(key), value)
    return merged


def json_patch(target: Any, operations: Iterable[Mapping[str, Any]]) -> Any:
    """RFC 6902 JSON patch with ``add``, ``remove``, ``replace`` and ``test``."""
    document = objects.thaw(target)
    for operation in operations:
        op, path = operation.get("op"), str(operation.get("path", ""))
        parent, last = _pointer_parent(document, path)
        if op == "test":
            if _pointer_get(parent, last) != operation.get("value"):
                raise ValueError(f"json patch test failed at {path!r}")
        elif op == "remove":
            _pointer_get(parent, last)  # a missing path is an error, as on the server
            del parent[int(last) if isinstance(parent, list) else last]
        elif op in ("add", "replace"):
            value = objects.thaw(operation.get("value"))
            if isinstance(parent, list):
                index = len(parent) if last == "-" else int(last)
                if op == "add":
                    parent.insert(index, value)
                else:
                    parent[index] = value
            else:
                if op == "replace":
                    _pointer_get(parent, last)
                parent[last] = value
        else:
            raise ValueError(f"json patch operation {op!r} is not supported by the fake")
    return document


def _pointer_parent(document: Any, path: str) -> tuple[Any, str]:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in path.split("/")[1:]]
    if not tokens:
        raise ValueError("json patch on the whole document is not supported by the fake")
    parent = document
    for token in tokens[:-1]:
        parent = _pointer_get(parent, token)
    return parent, tokens[-1]


def _pointer_get(parent: Any, token: str) -> Any:
    try:
        return parent[int(token)] if isinstance(parent, list) else parent[token]
    except (KeyError, IndexError, ValueError, TypeError):
        raise ValueError(f"json patch path element {token!r} does not exist") from None


class FakeClient:
    """An in-memory API server behind the client interface; build it with ``FakeClientBuilder``."""

    def __init__(
        self,
        *,
        clock: Callable[[], datetime] | None = None,
        no_status_subresource: frozenset[Kind] = NO_STATUS_SUBRESOURCE,
    ) -> None:
        self._clock = clock or FakeClock(DEFAULT_START)
        self._no_status = no_status_subresource
        self._lock = threading.RLock()
        self._stores: dict[Kind, Store] = {}
        self._versions = itertools.count(1)
        self._uids = itertools.count(1)
        self._suffixes = itertools.count(1)
        self._reactors: list[_Reactor] = []
        self._managed: dict[tuple[str, str], Ownership] = {}
        """Server-side apply's field owners, by (uid, subresource)."""
        self.writes: list[Action] = []
        self.reads: list[Action] = []
        self.live = self
        """Uncached reads: the same store (the fake has no cache lag)."""

    # Setup --------------------------------------------------------------------------

    def index_field(self, kind: Kind, field: str, fn: FieldIndexFunc) -> None:
        """Index ``kind`` by ``field`` for ``matching_fields``, as ``Cache.index_field``."""
        add_field_index(self._store(kind), field, fn)

    def add(self, kind: Kind, obj: Mapping[str, Any]) -> objects.Obj:
        """Store ``obj`` as it is (status included), filling in what the server would."""
        with self._lock:
            body = objects.thaw(obj)
            metadata = body.setdefault("metadata", {})
            if not metadata.get("name"):
                raise ValueError(f"initial {kind.kind} objects need metadata.name: {obj!r}")
            metadata.setdefault("uid", self._new_uid())
            metadata.setdefault("creationTimestamp", rfc3339(self._clock()))
            metadata.setdefault("generation", 1)
            return self._store_object(kind, body)

    def prepend_reactor(self, verb: str, kind: Kind | None, reaction: Reaction) -> None:
        """Consult ``reaction`` first on ``verb`` calls of ``kind`` (None: any kind).

        ``verb`` is get, list, create, update, patch or delete ("*" for all, reads
        included); status writes are update and patch with ``subresource="status"``;
        ``live`` reads are get and list too. A reaction that returns an error makes the
        call raise it and change nothing (the call is still logged).
        """
        with self._lock:
            self._reactors.insert(0, _Reactor(verb, kind, reaction))

    def writes_of(self, verb: str, kind: Kind | None = None) -> builtins.list[Action]:
        """The logged writes with this verb (and kind)."""
        with self._lock:
            return [a for a in self.writes if a.verb == verb and kind in (None, a.kind)]

    def reads_of(self, verb: str, kind: Kind | None = None) -> builtins.list[Action]:
        """The logged reads with this verb, get or list (and kind)."""
        with self._lock:
            return [a for a in self.reads if a.verb == verb and kind in (None, a.kind)]

    # Reader -------------------------------------------------------------------------

    def get(self, kind: Kind, name: str, namespace: str | None = None) -> objects.Obj:
        """The stored object, or ``errors.NotFound``."""
        with self._lock:
            self._react(Action("get", kind, namespace or "", name))
            return self._get(kind, name, namespace)

    def list(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        matching_fields: Mapping[str, str] | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> builtins.list[objects.Obj]:
        """Stored objects, with the cache's namespace, field-index and label rules."""
        options: dict[str, Any] = {}
        if matching_fields is not None:
            options["matching_fields"] = dict(matching_fields)
        if label_selector is not None:
            options["label_selector"] = (
                label_selector if isinstance(label_selector, str) else dict(label_selector)
            )
        with self._lock:
            self._react(Action("list", kind, namespace or "", "", body=options))
            return select(
                kind,
                self._store(kind),
                namespace=namespace,
                matching_fields=matching_fields,
                label_selector=label_selector,
            )

    def list_metadata(
        self,
        kind: Kind,
        *,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
    ) -> builtins.list[objects.Obj]:
        """Stored objects' apiVersion, kind and metadata (``LiveReads.list_metadata``)."""
        options: dict[str, Any] = {"metadata_only": True}
        if label_selector is not None:
            options["label_selector"] = (
                label_selector if isinstance(label_selector, str) else dict(label_selector)
            )
        with self._lock:
            self._react(Action("list", kind, namespace or "", "", body=options))
            found = select(
                kind, self._store(kind), namespace=namespace, label_selector=label_selector
            )
        return [_metadata_of(kind, obj) for obj in found]

    def list_page(
        self,
        kind: Kind,
        *,
        limit: int,
        namespace: str | None = None,
        label_selector: str | Mapping[str, str] | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> builtins.list[objects.Obj]:
        """The first ``limit`` stored objects by name (``LiveReads.list_page``), matching
        ``field_selector`` as the server does (``path=value``, ``path!=value``, joined by
        commas, on any field)."""
        options: dict[str, Any] = {"limit": limit, "metadata_only": metadata_only}
        if label_selector is not None:
            options["label_selector"] = (
                label_selector if isinstance(label_selector, str) else dict(label_selector)
            )
        if field_selector is not None:
            options["field_selector"] = field_selector
        with self._lock:
            self._react(Action("list", kind, namespace or "", "", body=options))
            found = select(
                kind, self._store(kind), namespace=namespace, label_selector=label_selector
            )
        matches = parse_selector(field_selector or "")
        page = sorted((obj for obj in found if matches(_FieldValues(obj))), key=objects.name_of)[
            :limit
        ]
        return [_metadata_of(kind, obj) for obj in page] if metadata_only else page

    # Writer -------------------------------------------------------------------------

    def create(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Create ``obj``; see the module docstring for the rules."""
        with self._lock:
            body = objects.thaw(obj)
            metadata = body.setdefault("metadata", {})
            if not metadata.get("name") and metadata.get("generateName"):
                metadata["name"] = self._generated_name(kind, metadata)
            name = str(metadata.get("name") or "")
            self._react(Action("create", kind, self._namespace(metadata), name, body=body))
            return self._insert(kind, body)

    def apply(
        self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> dict[str, Any]:
        """Server-side apply of ``obj`` (see ``client.Applier`` and ``_apply`` for the model);
        logged as a patch whose body is the applied configuration."""
        return self._server_side_apply(kind, obj, "", field_manager, force)

    def apply_status(
        self, kind: Kind, obj: Mapping[str, Any], *, field_manager: str, force: bool = False
    ) -> dict[str, Any]:
        """Server-side apply of ``obj``'s status."""
        return self._server_side_apply(kind, obj, "status", field_manager, force)

    def update(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace ``obj`` (its status is ignored when the kind has a status subresource)."""
        with self._lock:
            body = objects.thaw(obj)
            current = self._current(
                kind, body, Action("update", kind, *self._names(body), "", body)
            )
            if kind not in self._no_status:
                _set_status(body, current.get("status"))
            return self._replace(kind, current, body)

    def update_status(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Replace the status of ``obj``; nothing else changes."""
        with self._lock:
            body = objects.thaw(obj)
            action = Action("update", kind, *self._names(body), "status", body)
            current = self._current(kind, body, action)
            self._require_status(kind, action.name)
            new = _set_status(objects.thaw(current), body.get("status"))
            return self._replace(kind, current, new)

    def patch(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
    ) -> dict[str, Any]:
        """Patch one object (or its status); a ``resourceVersion`` in it is a precondition."""
        with self._lock:
            action = Action("patch", kind, namespace or "", name, subresource, patch)
            self._react(action)
            current = self._get(kind, name, namespace)
            if subresource:
                self._require_status(kind, name)
            try:
                patched = self._apply_patch(current, patch, patch_type)
            except ValueError as exc:
                message = f"the patch of {_resource(kind, name)} does not apply: {exc}"
                raise errors.BadRequest(
                    _status("BadRequest", 400, kind, name, message), code=400
                ) from None
            wanted = (patched.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != current["metadata"].get("resourceVersion"):
                raise _stale(kind, name)
            if subresource:
                patched = _set_status(objects.thaw(current), patched.get("status"))
            elif kind not in self._no_status:
                _set_status(patched, current.get("status"))
            return self._replace(kind, current, patched)

    def patch_status(
        self,
        kind: Kind,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
    ) -> dict[str, Any]:
        """Patch the status subresource."""
        return self.patch(
            kind, name, patch, namespace=namespace, patch_type=patch_type, subresource="status"
        )

    def delete(
        self,
        kind: Kind,
        name: str,
        *,
        namespace: str | None = None,
        propagation: Propagation | None = None,
        uid: str | None = None,
    ) -> None:
        """Delete one object (or mark it, if it has finalizers) and collect its dependents."""
        with self._lock:
            self._react(Action("delete", kind, namespace or "", name, body=propagation))
            current = self._get(kind, name, namespace)
            actual = current["metadata"].get("uid")
            if uid is not None and uid != actual:
                raise _conflict(
                    kind,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, UID in object meta: "
                    f"{actual}",
                )
            if propagation is None:
                propagation = (
                    Propagation.ORPHAN if kind in _ORPHAN_BY_DEFAULT else Propagation.BACKGROUND
                )
            self._delete(kind, current, propagation)

    # Internals ----------------------------------------------------------------------

    def _get(self, kind: Kind, name: str, namespace: str | None) -> objects.Obj:
        """``get`` without the log and the reactors: the server's own reads."""
        return lookup(kind, self._store(kind), name, namespace)

    def _store(self, kind: Kind) -> Store:
        store = self._stores.get(kind)
        if store is None:
            store = self._stores[kind] = Store()
        return store

    @staticmethod
    def _namespace(metadata: Mapping[str, Any]) -> str:
        return str(metadata.get("namespace") or "")

    @staticmethod
    def _names(body: Mapping[str, Any]) -> tuple[str, str]:
        metadata = body.get("metadata") or {}
        return str(metadata.get("namespace") or ""), str(metadata.get("name") or "")

    def _new_uid(self) -> str:
        return str(uuid.UUID(int=next(self._uids)))

    def _generated_name(self, kind: Kind, metadata: Mapping[str, Any]) -> str:
        while True:
            number, suffix = next(self._suffixes), ""
            for _ in range(5):
                number, digit = divmod(number, len(_NAME_ALPHABET))
                suffix += _NAME_ALPHABET[digit]
            name = f"{metadata['generateName']}{suffix}"
            key = store_key(kind, name, self._namespace(metadata))
            if self._store(kind).get(key) is None:
                return name

    def _react(self, action: Action) -> None:
        """Log ``action``, then raise the first error a matching reactor returns."""
        (self.reads if action.verb in _READ_VERBS else self.writes).append(action)
        for reactor in self._reactors:
            if reactor.verb in ("*", action.verb) and reactor.kind in (None, action.kind):
                error = reactor.reaction(action)
                if error is not None:
                    raise error

    def _check_create(self, kind: Kind, body: Mapping[str, Any]) -> None:
        metadata = body["metadata"]
        name = str(metadata.get("name") or "")
        if not name:
            raise _invalid(
                kind, name, "metadata.name", "Required value: name or generateName is required"
            )
        if kind.namespaced and not metadata.get("namespace"):
            raise _invalid(kind, name, "metadata.namespace", "Required value")
        if metadata.get("resourceVersion"):
            message = "resourceVersion should not be set on objects to be created"
            raise errors.BadRequest(_status("BadRequest", 400, kind, name, message), code=400)
        if self._store(kind).get(store_key(kind, name, metadata.get("namespace"))) is not None:
            message = f"{_resource(kind, name)} already exists"
            raise errors.AlreadyExists(_status("AlreadyExists", 409, kind, name, message), code=409)

    def _insert(self, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        """Store a new object as the server creates one (after the log and the reactors)."""
        self._check_create(kind, body)
        metadata = body["metadata"]
        metadata.update(uid=self._new_uid(), creationTimestamp=rfc3339(self._clock()), generation=1)
        for server_set in ("deletionTimestamp", "deletionGracePeriodSeconds"):
            metadata.pop(server_set, None)
        if kind not in self._no_status:
            body.pop("status", None)
        return self._write(kind, body)

    def _server_side_apply(
        self, kind: Kind, obj: Mapping[str, Any], subresource: str, manager: str, force: bool
    ) -> dict[str, Any]:
        with self._lock:
            config = objects.thaw(obj)
            namespace, name = self._names(config)
            self._react(Action("patch", kind, namespace, name, subresource, config))
            if subresource:
                self._require_status(kind, name)
                config = {"metadata": config.get("metadata") or {}, "status": config.get("status")}
            else:
                config.pop("status", None)
            try:
                current = self._get(kind, name, namespace or None)
            except errors.NotFound:
                if subresource:
                    raise
                current = None
            base: dict[str, Any] = {} if current is None else objects.thaw(current)
            uid = str(base.get("metadata", {}).get("uid", ""))
            owners = self._managed.get((uid, subresource), {})
            try:
                applied, owners = apply_configuration(
                    base, config, manager=manager, owners=owners, force=force
                )
            except ApplyConflict as exc:
                raise errors.Conflict(
                    _status("Conflict", 409, kind, name, str(exc)), code=409
                ) from None
            if current is None:
                applied.setdefault("apiVersion", kind.api_version)
                applied.setdefault("kind", kind.kind)
                result = self._insert(kind, applied)
            elif subresource:
                new = _set_status(objects.thaw(current), applied.get("status"))
                result = self._replace(kind, current, new)
            else:
                if kind not in self._no_status:
                    _set_status(applied, current.get("status"))
                result = self._replace(kind, current, applied)
            self._managed[(str(result["metadata"]["uid"]), subresource)] = owners
            return result

    def _current(self, kind: Kind, body: Mapping[str, Any], action: Action) -> objects.Obj:
        """The stored object ``body`` replaces, after the reactors and preconditions."""
        self._react(action)
        metadata = body.get("metadata") or {}
        current = self._get(kind, action.name, action.namespace or None)
        stored = current["metadata"]
        if metadata.get("uid") and metadata["uid"] != stored.get("uid"):
            raise _conflict(
                kind,
                action.name,
                f"Precondition failed: UID in precondition: {metadata['uid']}, UID in object "
                f"meta: {stored.get('uid')}",
            )
        wanted = metadata.get("resourceVersion")
        if wanted and wanted != stored.get("resourceVersion"):
            raise _stale(kind, action.name)
        return current

    def _require_status(self, kind: Kind, name: str) -> None:
        if kind in self._no_status:
            message = f"the server could not find the requested resource ({kind.plural}/status)"
            raise errors.NotFound(_status("NotFound", 404, kind, name, message), code=404)

    @staticmethod
    def _apply_patch(current: objects.Obj, patch: Any, patch_type: PatchType) -> Any:
        if patch_type is PatchType.MERGE:
            return apply_merge_patch(current, patch)
        if patch_type is PatchType.JSON:
            return json_patch(current, patch)
        raise NotImplementedError(
            "the fake client does not implement strategic merge patch; use PatchType.MERGE"
        )

    def _replace(self, kind: Kind, current: objects.Obj, body: dict[str, Any]) -> dict[str, Any]:
        """Write ``body`` over ``current``, keeping server-owned metadata; a no-op is free."""
        stored = current["metadata"]
        body.setdefault("apiVersion", current.get("apiVersion"))
        body.setdefault("kind", current.get("kind"))
        metadata = body.setdefault("metadata", {})
        for owned in (
            "uid",
            "name",
            "namespace",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ):
            if owned in stored:
                metadata[owned] = stored[owned]
            else:
                metadata.pop(owned, None)
        name = str(stored.get("name"))
        if stored.get("deletionTimestamp"):
            added = set(metadata.get("finalizers") or ()) - set(stored.get("finalizers") or ())
            if added:
                raise _invalid(
                    kind,
                    name,
                    "metadata.finalizers",
                    f"Forbidden: no new finalizers can be added if the object is being "
                    f"deleted, found new finalizers {sorted(added)}",
                )
        before: dict[str, Any] = objects.thaw(current)
        if _same(body, before):
            return before
        if not _same(_spec_of(body), _spec_of(before)):
            metadata["generation"] = int(stored.get("generation") or 0) + 1
        if stored.get("deletionTimestamp") and not metadata.get("finalizers"):
            self._remove(kind, current, Propagation.BACKGROUND)
            return body
        return self._write(kind, body)

    def _write(self, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
        body["metadata"]["resourceVersion"] = str(next(self._versions))
        if not body.get("apiVersion") or not body.get("kind"):
            body = {"apiVersion": kind.api_version, "kind": kind.kind, **body}
        self._store_object(kind, body)
        return objects.thaw(body)  # type: ignore[no-any-return]

    def _store_object(self, kind: Kind, body: dict[str, Any]) -> objects.Obj:
        body.setdefault("apiVersion", kind.api_version)
        body.setdefault("kind", kind.kind)
        body["metadata"].setdefault("resourceVersion", str(next(self._versions)))
        frozen: objects.Obj = objects.freeze(body)
        self._store(kind).upsert(frozen)
        return frozen

    def _delete(self, kind: Kind, current: objects.Obj, propagation: Propagation) -> None:
        metadata = current["metadata"]
        if metadata.get("finalizers"):
            if not metadata.get("deletionTimestamp"):
                body = objects.thaw(current)
                body["metadata"]["deletionTimestamp"] = rfc3339(self._clock())
                body["metadata"]["deletionGracePeriodSeconds"] = 0
                self._write(kind, body)
            return
        self._remove(kind, current, propagation)

    def _remove(self, kind: Kind, current: objects.Obj, propagation: Propagation) -> None:
        """Remove ``current`` and apply ``propagation`` to its dependents (synchronously)."""
        if propagation is Propagation.FOREGROUND:
            self._collect(current, propagation)
        self._store(kind).delete(objects.object_key(current))
        if propagation is not Propagation.FOREGROUND:
            self._collect(current, propagation)

    def _collect(self, owner: objects.Obj, propagation: Propagation) -> None:
        uid = owner["metadata"].get("uid")
        for kind, dependent in self._dependents_of(uid):
            body = objects.thaw(dependent)
            refs = body["metadata"].get("ownerReferences") or []
            body["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
            if propagation is not Propagation.ORPHAN and not any(
                self._exists(dependent, ref) for ref in body["metadata"]["ownerReferences"]
            ):
                self._delete(kind, dependent, Propagation.BACKGROUND)
                continue
            if not body["metadata"]["ownerReferences"]:
                del body["metadata"]["ownerReferences"]
            self._write(kind, body)

    def _dependents_of(self, uid: str | None) -> builtins.list[tuple[Kind, objects.Obj]]:
        return [
            (kind, obj)
            for kind, store in self._stores.items()
            for obj in store.list()
            if any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences") or ())
        ]

    def _exists(self, dependent: objects.Obj, ref: Mapping[str, Any]) -> bool:
        """True when the owner ``ref`` names is stored (same namespace, or cluster-scoped)."""
        namespace = objects.namespace_of(dependent)
        for kind, store in self._stores.items():
            if not kind.matches(str(ref.get("apiVersion", "")), str(ref.get("kind", ""))):
                continue
            owner = store.get(store_key(kind, str(ref.get("name")), namespace))
            if owner is not None and owner["metadata"].get("uid") == ref.get("uid"):
                return True
        return False


def _metadata_of(kind: Kind, obj: objects.Obj) -> objects.Obj:
    """``obj`` as a PartialObjectMetadata of its kind: apiVersion, kind and metadata."""
    return objects.freeze(  # type: ignore[no-any-return]
        {"apiVersion": kind.api_version, "kind": kind.kind, "metadata": obj["metadata"]}
    )


class _FieldValues(Mapping[str, str]):
    """An object's fields by dotted path (``status.phase``), as a field selector reads
    them: a missing field is the empty string, any other value its text."""

    def __init__(self, obj: objects.Obj) -> None:
        self._obj = obj

    def __getitem__(self, path: str) -> str:
        value: Any = self._obj
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        return "" if value is None else str(value)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def _set_status(body: dict[str, Any], status: Any) -> dict[str, Any]:
    """``body`` with ``status`` in place of its own (and none when ``status`` is None)."""
    body.pop("status", None)
    if status is not None:
        body["status"] = objects.thaw(status)
    return body


def _same(first: Any, second: Any) -> bool:
    """``first == second`` at any depth (``==`` recurses: past Python's limit the two
    are compared as canonical JSON, which does not)."""
    try:
        return bool(first == second)
    except RecursionError:
        return canonical_json(first) == canonical_json(second)


def _spec_of(obj: Mapping[str, Any]) -> dict[str, Any]:
    """Everything that moves ``generation``: all but type, metadata and status."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}


@dataclass
class FakeClientBuilder:
    """Builds a ``FakeClient``: ``FakeClientBuilder().with_objects(...).build()``."""

    _kinds: dict[tuple[str, str], Kind] = field(default_factory=dict)
    _objects: builtins.list[Mapping[str, Any]] = field(default_factory=list)
    _indexes: builtins.list[tuple[Kind, str, FieldIndexFunc]] = field(default_factory=list)
    _no_status: set[Kind] = field(default_factory=lambda: set(NO_STATUS_SUBRESOURCE))
    _clock: Callable[[], datetime] | None = None

    def __post_init__(self) -> None:
        self.with_kinds(
            kinds.JOB,
            kinds.POD,
            kinds.CONFIG_MAP,
            kinds.SECRET,
            kinds.EVENT,
            kinds.NAMESPACE,
            kinds.DEPLOYMENT,
            kinds.REPLICA_SET,
            kinds.LEASE,
        )

    def with_kinds(self, *known: Kind) -> FakeClientBuilder:
        """Let ``with_objects`` recognise these kinds by apiVersion and kind (the scheme)."""
        for kind in known:
            self._kinds[(kind.api_version, kind.kind)] = kind
        return self

    def with_objects(self, *initial: Mapping[str, Any]) -> FakeClientBuilder:
        """Objects the client starts with, stored as given (status included)."""
        for obj in initial:
            self._kind_of(obj)  # fail here, where the test names the object
        self._objects.extend(initial)
        return self

    def with_index(self, kind: Kind, field_name: str, fn: FieldIndexFunc) -> FakeClientBuilder:
        """Index ``kind`` by ``field_name``, as the controller's setup does on the cache."""
        self._indexes.append((kind, field_name, fn))
        return self

    def with_status_subresource(self, kind: Kind, *, enabled: bool = True) -> FakeClientBuilder:
        """Say whether ``kind`` is served with a status subresource (default: yes)."""
        if enabled:
            self._no_status.discard(kind)
        else:
            self._no_status.add(kind)
        return self

    def with_clock(self, clock: Callable[[], datetime]) -> FakeClientBuilder:
        """The clock behind ``creationTimestamp`` and ``deletionTimestamp``."""
        self._clock = clock
        return self

    def build(self) -> FakeClient:
        """The client, with the indexes registered and the objects stored."""
        client = FakeClient(clock=self._clock, no_status_subresource=frozenset(self._no_status))
        for kind, field_name, fn in self._indexes:
            client.index_field(kind, field_name, fn)
        for obj in self._objects:
            client.add(self._kind_of(obj), obj)
        return client

    def _kind_of(self, obj: Mapping[str, Any]) -> Kind:
        key = (str(obj.get("apiVersion") or ""), str(obj.get("kind") or ""))
        kind = self._kinds.get(key)
        if kind is None:
            raise ValueError(
                f"with_objects: {objects.object_key(obj)!r} has apiVersion {key[0]!r} and kind "
                f"{key[1]!r}, which the builder does not know; register it with "
                "with_kinds(Kind(...)) first"
            )
        return kind


if TYPE_CHECKING:  # mypy proves the fakes stand in for the real client and recorder

    def _implements_client(client: FakeClient) -> ClientInterface:
        return client

    def _implements_recorder(recorder: FakeRecorder) -> Recorder:
        return recorder
