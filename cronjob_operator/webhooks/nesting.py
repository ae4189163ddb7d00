"""How deep an admitted object may nest: one bound for every kind the webhooks admit.

Free-form fields (``x-kubernetes-preserve-unknown-fields``: a pod template's
``affinity``, a ConfigDeployment's ``template``) pass any schema, and the API server
decodes up to 10,000 levels. The runtime copes with any depth (``runtime.objects``,
``runtime.client``), but a stored object nested that deep costs every reader a slow path,
and nothing real needs it: the deepest paths of a built-in Pod template are about 20
levels below a CronJob's root (``spec.jobTemplate.spec.template.spec.affinity.nodeAffinity
.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[].matchExpressions[]
.values[]`` is 15). ``MAX_DEPTH`` allows three times that, and stays far below orjson's
limits (254 levels to encode, 1,024 to decode), so every admitted object keeps the fast
path everywhere. An update of an object already deeper (stored before this rule, or
with the webhook out of the path) is not refused for it, as upstream ratchets new rules,
so such an object can still be changed and deleted.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from cronjob_operator.runtime import webhook
from cronjob_operator.runtime.webhook import FieldError

__all__ = ["MAX_DEPTH", "nesting_errors", "path_beyond", "users_fields"]

MAX_DEPTH: Final = 64
"""The most levels of objects and lists an admitted object may nest (the root is one)."""
_SHOWN_SEGMENTS: Final = 12
"""How much of the path to a too-deep field an error names: enough to find the field."""


def nesting_errors(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """One Invalid error naming the first field nested beyond ``MAX_DEPTH``, else none.

    On update (``old`` given), none when ``old`` was already that deep (module doc). Only
    the user's fields are measured (``users_fields``).
    """
    path = path_beyond(users_fields(obj), MAX_DEPTH)
    if path is None:
        return []
    if old is not None and path_beyond(users_fields(old), MAX_DEPTH) is not None:
        return []
    return [
        webhook.invalid(
            _field(path),
            f"<nested more than {MAX_DEPTH} levels>",
            f"objects and lists may nest at most {MAX_DEPTH} levels (a real pod template "
            "needs about 20); flatten or remove this field",
        )
    ]


def users_fields(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``obj`` without ``metadata.managedFields`` (the server's record of who set which
    field, not a field of the user's); a shallow copy, ``obj`` itself when it has none."""
    metadata = obj.get("metadata")
    if not isinstance(metadata, Mapping) or "managedFields" not in metadata:
        return obj
    kept = {key: value for key, value in metadata.items() if key != "managedFields"}
    return {**obj, "metadata": kept}


def path_beyond(value: Any, depth: int) -> tuple[str | int, ...] | None:
    """The path to the first object or list nested deeper than ``depth`` levels in
    ``value`` (itself one level), or None. Iterative: any depth costs no Python frame, and
    the walk stops at ``depth + 1``, so a path is never longer than that."""
    pending: list[tuple[Any, tuple[str | int, ...]]] = [(value, ())]
    while pending:
        item, path = pending.pop()
        children: Any
        if isinstance(item, Mapping):
            children = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if len(path) >= depth:
            return path
        pending.extend((child, (*path, key)) for key, child in children)
    return None


def _field(path: tuple[str | int, ...]) -> str:
    """``path`` as a field path (``spec.template[0].x``), its first segments only."""
    text = ""
    for segment in path[:_SHOWN_SEGMENTS]:
        text += f"[{segment}]" if isinstance(segment, int) else f".{str(segment)[:63]}"
    return text.lstrip(".") + ("..." if len(path) > _SHOWN_SEGMENTS else "")
