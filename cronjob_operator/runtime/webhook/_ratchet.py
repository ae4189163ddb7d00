"""The ratchet: a validating webhook refuses an update only for what the update changes.

Why: an object can be stored that no longer validates (written while the webhook was out
of the path, or before a rule tightened). Refusing every update of it for a problem the
update does not touch blocks the writes that must go through: a no-op update (a storage
migration's rewrite, a controller's write back), a label, a finalizer's removal. Since
Kubernetes 1.30 the API server ratchets a CRD's own schema validation the same way (an
unchanged value is not validated again: KEP-4008, CRDValidationRatcheting).

The rule, for each error of the updated object: it is dropped when the old object, judged
by the same rules, has the same error (field, reason, value and detail) and the value at
the error's field is the same in both. So an update that leaves the spec as it was
(metadata only, or nothing at all) is admitted, and so is one that changes other fields
and leaves the bad one alone; an update that writes a bad value, or that makes another
field wrong (a new error, or a different detail: a schedule change that a stagger no
longer fits), is refused as before. An error whose field path cannot be followed in the
objects (a path shown shortened) is never dropped here, nor is any when comparing the
values would nest deeper than Python can (a stored object the nesting bound never saw).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from cronjob_operator.runtime.webhook._admission import FieldError

_SEGMENT: Final = re.compile(r"(?:^|\.)(?P<name>[^.\[\]]+)|\[(?P<key>[^\[\]]*)\]")
"""One step of a field path: ``.name`` (or the first name), or ``[key]`` / ``[index]``."""


class _Missing:
    """The value at a path the object does not have (absent, or a scalar on the way)."""


_MISSING: Final = _Missing()


def ratcheted(
    errors: Sequence[FieldError],
    obj: Mapping[str, Any],
    old: Mapping[str, Any],
    old_errors: Callable[[], Sequence[FieldError]],
) -> list[FieldError]:
    """``errors`` of the update of ``old`` to ``obj`` without those it does not cause.

    ``old_errors`` judges ``old`` by the same rules (as an update to itself); it is
    called only when there is an error to weigh."""
    if not errors:
        return []
    before = old_errors()
    try:
        return [
            error
            for error in errors
            if error not in before or not _unchanged_at(error.field, obj, old)
        ]
    except RecursionError:  # a value nested past the interpreter's limit: judged in full
        return list(errors)


def _unchanged_at(field: str, obj: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    steps = _steps(field)
    if steps is None:
        return False
    return bool(_value_at(obj, steps) == _value_at(old, steps))


def _steps(field: str) -> list[tuple[str, bool]] | None:
    """``field`` as (name or key, bracketed) steps; None when it is not a whole path."""
    steps: list[tuple[str, bool]] = []
    position = 0
    while position < len(field):
        match = _SEGMENT.match(field, position)
        if match is None or match.end() == position:
            return None
        name = match["name"]
        steps.append((name, False) if name is not None else (match["key"], True))
        position = match.end()
    return steps or None


def _value_at(obj: Any, steps: list[tuple[str, bool]]) -> Any:
    value = obj
    for step, bracketed in steps:
        if isinstance(value, Mapping):
            value = value.get(step, _MISSING)
        elif bracketed and isinstance(value, list) and step.isdigit() and int(step) < len(value):
            value = value[int(step)]
        else:
            return _MISSING
        if value is _MISSING:
            return _MISSING
    return value
