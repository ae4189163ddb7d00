"""Stored objects whose shape the CRD schema no longer admits: found once, reported clearly.

The API server checks a CustomResource against its CRD schema when it is written, not
when it is read: an object stored before a rule tightened (or by a storage migration,
or by hand in etcd) reaches the cache as whatever JSON it holds. The controllers read
fields by their schema type, so a field of another JSON type (a string where an object
is due), a timestamp that does not parse, a number past int32 or int64, or a list or
string past the schema's bound made a reconcile raise deep inside (``AttributeError``,
``ValueError``...), retried with backoff for ever, or cost without bound (the stored-object
fuzzer of issue 47, tests/unit/test_stored_object_fuzz.py, found each).

:func:`misfit` checks an object against its kind's structural schema, which
``crdgen.openapi_schema`` makes of the pydantic models, before anything else reads it:
types, ``int-or-string``, required fields, null list entries, the ``date-time``,
``int32`` and ``int64`` formats, ``maxItems`` and ``maxLength``, nothing else (patterns,
enums, ranges and CEL rules are the readers' to report: each says what it does with such
a value). The walk follows the schema, never a value's own nesting (free-form fields are
not entered), stops at the first misfit, and is linear in the typed part of the object;
:class:`Checks` pays it once per object version. A misfit in the spec is reported
(a Warning event naming the object, the field and the fix) and nothing else is done: no
requeue, the object's next edit reconciles it again. One in the status, the
controller's own record, is reported and dropped, and the status written again.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from cronjob_operator.api.crdgen import openapi_schema
from cronjob_operator.api.markers import Resource
from cronjob_operator.runtime import objects
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.events import Recorder
from cronjob_operator.runtime.serving import clipped

__all__ = [
    "CHECKS_KEPT",
    "INVALID_STORED_OBJECT",
    "Checks",
    "Misfit",
    "misfit",
    "without_status_misfits",
]

INVALID_STORED_OBJECT: Final = "InvalidStoredObject"
CHECKS_KEPT: Final = 10_000
"""Object versions a :class:`Checks` remembers (a few MB at most)."""
"""The reason of the Warning event that reports a misfit."""

_INT_RANGES: Final = {"int32": 2**31, "int64": 2**63}
_JSON_TYPES: Final = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (Mapping,),
    "array": (list, tuple),
}


@dataclass(frozen=True, slots=True)
class Misfit:
    """The first field of a stored object its schema does not admit."""

    field: str
    """The field's path as Kubernetes writes it: ``spec.jobTemplate.spec.parallelism``."""
    problem: str
    """What is wrong with the stored value (it quotes the value, clipped)."""

    @property
    def in_status(self) -> bool:
        return self.field == "status" or self.field.startswith("status.")

    def message(self, resource: Resource, name: str) -> str:
        """The report: the field, what is stored, and how to correct it (a status field
        the controller writes again itself)."""
        stored = (
            f"{self.field}: {self.problem}, which the {resource.kind.kind} schema does not "
            "admit (it was stored before the rule or with validation bypassed)"
        )
        if self.in_status:
            return f"{stored}; the controller drops it and writes the status again"
        return (
            f"{stored}; nothing is done for this {resource.kind.kind} until it is corrected "
            f"(kubectl edit {resource.kind.plural} {name}, or delete and re-create it)"
        )


@functools.cache
def _schema(resource: Resource) -> Mapping[str, Any]:
    return openapi_schema(resource)


def misfit(obj: Mapping[str, Any], resource: Resource) -> Misfit | None:
    """The first field of ``obj`` (its spec, then its status) that ``resource``'s schema
    does not admit (see the module docstring), or None."""
    return _part_misfit(obj, resource, "spec") or _part_misfit(obj, resource, "status")


def _part_misfit(obj: Mapping[str, Any], resource: Resource, top: str) -> Misfit | None:
    properties = _schema(resource).get("properties") or {}
    if top not in obj or top not in properties:
        return None
    return _first_misfit(obj[top], properties[top], top)


class Checks:
    """:func:`misfit` of the objects of one kind, each part checked once: the spec once
    per ``generation`` (which only a spec change moves: the status subresource), the
    status once per ``resourceVersion``, so a reconcile after the controller's own status
    write does not walk the spec again (a typed list of a few hundred thousand entries
    takes seconds). At most ``CHECKS_KEPT`` results are remembered, the oldest forgotten
    first."""

    def __init__(self, resource: Resource) -> None:
        self.resource = resource
        self._seen: OrderedDict[tuple[str, str, str], Misfit | None] = OrderedDict()

    def misfit(self, obj: Mapping[str, Any]) -> Misfit | None:
        metadata = obj.get("metadata") or {}
        uid = str(metadata.get("uid"))
        spec_key = ("spec", uid, str(metadata.get("generation")))
        status_key = ("status", uid, str(metadata.get("resourceVersion")))
        return self._checked(obj, spec_key) or self._checked(obj, status_key)

    def _checked(self, obj: Mapping[str, Any], key: tuple[str, str, str]) -> Misfit | None:
        if key in self._seen:
            self._seen.move_to_end(key)
            return self._seen[key]
        found = _part_misfit(obj, self.resource, key[0])
        self._seen[key] = found
        if len(self._seen) > CHECKS_KEPT:
            self._seen.popitem(last=False)
        return found

    def fitting(self, obj: objects.Obj, recorder: Recorder) -> objects.Obj | None:
        """``obj`` as a reconcile may read it: None when a spec field is a misfit, else
        without the status fields that are (``without_status_misfits``). Each misfit is
        reported on ``obj`` (a Warning event; the recorder folds repeats into one)."""
        found = self.misfit(obj)
        if found is None:
            return obj
        name = objects.name_of(obj)
        if not found.in_status:
            message = found.message(self.resource, name)
            recorder.event(obj, "Warning", INVALID_STORED_OBJECT, message)
            return None
        kept, dropped = without_status_misfits(obj, self.resource, found)
        for each in dropped:
            message = each.message(self.resource, name)
            recorder.event(obj, "Warning", INVALID_STORED_OBJECT, message)
        frozen: objects.Obj = objects.freeze(kept)
        return frozen


def without_status_misfits(
    obj: Mapping[str, Any], resource: Resource, found: Misfit
) -> tuple[dict[str, Any], list[Misfit]]:
    """``obj`` without the top-level status fields that hold a misfit (``found`` and any
    after it), and those misfits: the controller writes those fields again from what it
    observes, as it would for an object with no status yet."""
    status = dict(obj.get("status") or {}) if isinstance(obj.get("status"), Mapping) else {}
    dropped: list[Misfit] = []
    current: Misfit | None = found
    while current is not None and current.in_status:
        dropped.append(current)
        key = current.field.removeprefix("status.").split(".")[0].split("[")[0]
        if current.field == "status" or key not in status:
            status = {}
        else:
            del status[key]
        current = misfit({"status": status}, resource)
    return {**obj, "status": status}, dropped


def _first_misfit(value: Any, node: Mapping[str, Any], path: str) -> Misfit | None:
    """Depth first over the schema's typed fields (an explicit stack: a schema may nest
    deeper than a few levels, and values only as deep as the schema goes)."""
    stack: list[tuple[Any, Mapping[str, Any], str]] = [(value, node, path)]
    while stack:
        value, node, path = stack.pop()
        problem = _problem(value, node, entry=path.endswith("]"))
        if problem is not None:
            return Misfit(path, problem)
        if value is None:
            continue
        absent = _missing_required(value, node)
        if absent is not None:
            return Misfit(f"{path}.{absent}", "required, but absent")
        stack.extend(reversed(list(_children(value, node, path))))
    return None


def _missing_required(value: Any, node: Mapping[str, Any]) -> str | None:
    """The first field ``node`` requires that the object ``value`` lacks (or holds null)."""
    if not isinstance(value, Mapping):
        return None
    return next((name for name in node.get("required") or () if value.get(name) is None), None)


def _children(
    value: Any, node: Mapping[str, Any], path: str
) -> list[tuple[Any, Mapping[str, Any], str]]:
    """The typed fields inside ``value`` (which fits ``node``'s type), in schema order."""
    children: list[tuple[Any, Mapping[str, Any], str]] = []
    if isinstance(value, Mapping):
        for name, child in (node.get("properties") or {}).items():
            if name in value:
                children.append((value[name], child, f"{path}.{name}"))
        values = node.get("additionalProperties")
        if isinstance(values, Mapping) and values.get("type"):
            children += [(item, values, f"{path}[{key!r}]") for key, item in value.items()]
    items = node.get("items")
    if isinstance(value, list | tuple) and isinstance(items, Mapping):
        children += [(item, items, f"{path}[{index}]") for index, item in enumerate(value)]
    return children


def _problem(value: Any, node: Mapping[str, Any], *, entry: bool) -> str | None:
    """What ``node`` does not admit about ``value`` itself (its fields aside); ``entry``:
    ``value`` is an entry of a list or map, where a null is not pruned."""
    if value is None:
        # A field holding null reads as absent (the API server prunes one it does not
        # admit, and a required one is reported by its parent); an entry cannot be.
        return "stored as null" if entry and not node.get("nullable") else None
    wanted = _wanted_types(node)
    if wanted and not any(_is(value, type_) for type_ in wanted):
        return f"stored as {_json_type(value)} {clipped(value)}, not {' or '.join(wanted)}"
    return _past_bound(value, node)


def _wanted_types(node: Mapping[str, Any]) -> Sequence[str]:
    if node.get("x-kubernetes-int-or-string"):
        return ("integer", "string")
    type_ = node.get("type")
    return (type_,) if isinstance(type_, str) else ()


def _is(value: Any, type_: str) -> bool:
    if isinstance(value, bool) and type_ != "boolean":
        return False
    return isinstance(value, _JSON_TYPES.get(type_, object))


def _json_type(value: Any) -> str:
    for type_ in ("boolean", "integer", "number", "string", "object", "array"):
        if _is(value, type_):
            return type_
    return type(value).__name__


def _past_bound(value: Any, node: Mapping[str, Any]) -> str | None:
    """The format or size bound of ``node`` that ``value`` (of the right type) breaks."""
    size = str(node.get("format") or "int64")  # a JSON integer is at most an int64
    bound = _INT_RANGES.get(size)
    if bound is not None and isinstance(value, int) and not -bound <= value < bound:
        return f"{clipped(value)} does not fit {size}"
    if node.get("format") == "date-time" and isinstance(value, str) and not _parses(value):
        return f"{clipped(value)} is not an RFC 3339 time"
    if isinstance(value, str) and len(value) > node.get("maxLength", len(value)):
        return f"{len(value)} characters long, more than {node['maxLength']}"
    if isinstance(value, list | tuple) and len(value) > node.get("maxItems", len(value)):
        return f"{len(value)} entries, more than {node['maxItems']}"
    return None


def _parses(text: str) -> bool:
    try:
        parse_time(text)
    except ValueError:
        return False
    return True
