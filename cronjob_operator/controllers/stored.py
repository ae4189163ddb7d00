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
not entered), stops at the first misfit, and is linear in the typed part of the object
(the schema is read once into a tree of rules: each node's types and bounds at hand);
:class:`Checks` pays it once per object version. A misfit in the spec is reported
(a Warning event naming the object, the field and the fix) and nothing else is done: no
requeue, the object's next edit reconciles it again. One in the status, the
controller's own record, is reported and dropped, and the status written again.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from collections.abc import Mapping
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
    "object": (dict, Mapping),  # dict first: every cached object is one, and cheaper
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
def _rules(resource: Resource) -> Mapping[str, _Rule]:
    """The rules of the top-level parts (spec, status) of ``resource``'s schema."""
    properties = openapi_schema(resource).get("properties") or {}
    return {top: _rule_of(properties[top]) for top in ("spec", "status") if top in properties}


def misfit(obj: Mapping[str, Any], resource: Resource) -> Misfit | None:
    """The first field of ``obj`` (its spec, then its status) that ``resource``'s schema
    does not admit (see the module docstring), or None."""
    return _part_misfit(obj, resource, "spec") or _part_misfit(obj, resource, "status")


def _part_misfit(obj: Mapping[str, Any], resource: Resource, top: str) -> Misfit | None:
    rules = _rules(resource)
    if top not in obj or top not in rules:
        return None
    return _first_misfit(obj[top], rules[top], top)


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


def _first_misfit(value: Any, rule: _Rule, path: str) -> Misfit | None:
    """Depth first over the schema's typed fields (an explicit stack: a schema may nest
    deeper than a few levels, and values only as deep as the schema goes)."""
    stack: list[tuple[Any, _Rule, str, bool]] = [(value, rule, path, False)]
    while stack:
        value, rule, path, entry = stack.pop()
        if value is None:
            # A field holding null reads as absent (the API server prunes one it does not
            # admit, and a required one is reported by its parent); an entry cannot be.
            if entry and not rule.nullable:
                return Misfit(path, "stored as null")
            continue
        problem = rule.problem(value)
        if problem is not None:
            return Misfit(path, problem)
        is_object = isinstance(value, dict | Mapping)  # a dict first: the cheaper check
        if is_object:
            absent = next((name for name in rule.required if value.get(name) is None), None)
            if absent is not None:
                return Misfit(f"{path}.{absent}", "required, but absent")
        stack.extend(reversed(_children(value, rule, path, is_object)))
    return None


def _children(
    value: Any, rule: _Rule, path: str, is_object: bool
) -> list[tuple[Any, _Rule, str, bool]]:
    """The typed fields inside ``value`` (which fits ``rule``'s type), in schema order;
    the last item says whether the field is an entry of a list or map."""
    children: list[tuple[Any, _Rule, str, bool]] = []
    if is_object:
        children += [
            (value[name], child, f"{path}.{name}", False)
            for name, child in rule.properties
            if name in value
        ]
        if rule.values is not None:
            values = rule.values
            children += [(item, values, f"{path}[{key!r}]", True) for key, item in value.items()]
    if rule.items is not None and isinstance(value, list | tuple):
        items = rule.items
        children += [(item, items, f"{path}[{index}]", True) for index, item in enumerate(value)]
    return children


@dataclass(frozen=True, slots=True)
class _Rule:
    """One schema node, read once (``_rule_of``): what a stored value must be there."""

    wanted: tuple[str, ...]
    """The JSON types admitted (none: any)."""
    python: tuple[type, ...]
    """The Python types of ``wanted`` (``object`` for a type this module does not know)."""
    boolean: bool
    """Whether ``wanted`` admits a boolean (a bool is an int to Python, not to JSON)."""
    int_format: str | None
    """The integer format whose range an integer must fit (int64 unless another is set)."""
    date_time: bool
    max_length: int | None
    max_items: int | None
    nullable: bool
    required: tuple[str, ...]
    properties: tuple[tuple[str, _Rule], ...]
    values: _Rule | None
    """The rule of a map's entries (``additionalProperties`` with a type)."""
    items: _Rule | None

    def problem(self, value: Any) -> str | None:
        """What this node does not admit about ``value`` itself (not None; its fields
        aside)."""
        if self.wanted and not self._admits_type(value):
            return f"stored as {_json_type(value)} {clipped(value)}, not {' or '.join(self.wanted)}"
        return self._past_bound(value)

    def _admits_type(self, value: Any) -> bool:
        if isinstance(value, bool) and not self.boolean:
            return False
        return isinstance(value, self.python)

    def _past_bound(self, value: Any) -> str | None:
        """The format or size bound that ``value`` (of the right type) breaks."""
        if isinstance(value, str):
            if self.date_time and not _parses(value):
                return f"{clipped(value)} is not an RFC 3339 time"
            if self.max_length is not None and len(value) > self.max_length:
                return f"{len(value)} characters long, more than {self.max_length}"
        elif isinstance(value, int) and self.int_format is not None:
            bound = _INT_RANGES[self.int_format]
            if not -bound <= value < bound:
                return f"{clipped(value)} does not fit {self.int_format}"
        elif (
            isinstance(value, list | tuple)
            and self.max_items is not None
            and len(value) > self.max_items
        ):
            return f"{len(value)} entries, more than {self.max_items}"
        return None


def _rule_of(node: Mapping[str, Any]) -> _Rule:
    """``node`` and the typed nodes under it, as rules."""
    if node.get("x-kubernetes-int-or-string"):
        wanted: tuple[str, ...] = ("integer", "string")
    else:
        type_ = node.get("type")
        wanted = (type_,) if isinstance(type_, str) else ()
    size = str(node.get("format") or "int64")  # a JSON integer is at most an int64
    values = node.get("additionalProperties")
    items = node.get("items")
    return _Rule(
        wanted=wanted,
        python=tuple(t for type_ in wanted for t in _JSON_TYPES.get(type_, (object,))),
        boolean="boolean" in wanted,
        int_format=size if size in _INT_RANGES else None,
        date_time=node.get("format") == "date-time",
        max_length=node.get("maxLength"),
        max_items=node.get("maxItems"),
        nullable=bool(node.get("nullable")),
        required=tuple(node.get("required") or ()),
        properties=tuple(
            (name, _rule_of(child)) for name, child in (node.get("properties") or {}).items()
        ),
        values=_rule_of(values) if isinstance(values, Mapping) and values.get("type") else None,
        items=_rule_of(items) if isinstance(items, Mapping) else None,
    )


def _json_type(value: Any) -> str:
    for type_ in ("boolean", "integer", "number", "string", "object", "array"):
        if isinstance(value, _JSON_TYPES[type_]) and (
            type_ == "boolean" or not isinstance(value, bool)
        ):
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
