"""What a reconciler does to the objects it manages: ownership, create-or-update, status.

``set_controller_reference`` / ``is_controlled_by`` and finalizer helpers;
``create_or_update`` / ``create_or_patch`` returning an ``OperationResult``;
``write_status`` (write only when changed, a Conflict merged three-way onto a fresh
read) and ``StatusEchoes`` (skip the watch echo of that write); ``set_condition`` /
``condition_setter`` (metav1.Condition rules).

Machinery: ``_ownership``, ``_status``, ``_conditions``, ``_apply`` (the server-side
apply field-ownership model the fake client uses).
"""

from typing import TYPE_CHECKING

from cronjob_operator._lazy import exports, type_checking_homes

if TYPE_CHECKING:
    from cronjob_operator.runtime.controllerutil._apply import (
        ApplyConflict,
        Ownership,
        apply_configuration,
        leaf_paths,
    )
    from cronjob_operator.runtime.controllerutil._conditions import (
        ConditionSetter,
        condition_setter,
        find_condition,
        parse_time,
        rfc3339,
        set_condition,
    )
    from cronjob_operator.runtime.controllerutil._ownership import (
        AlreadyOwnedError,
        ObjectClient,
        OperationResult,
        add_finalizer,
        contains_finalizer,
        controller_reference,
        create_or_patch,
        create_or_update,
        is_controlled_by,
        merge_patch,
        remove_finalizer,
        set_controller_reference,
    )
    from cronjob_operator.runtime.controllerutil._status import (
        STATUS_WRITE_ATTEMPTS,
        StatusClient,
        StatusEchoes,
        merge_status,
        write_status,
    )

__all__ = [
    "STATUS_WRITE_ATTEMPTS",
    "AlreadyOwnedError",
    "ApplyConflict",
    "ConditionSetter",
    "ObjectClient",
    "OperationResult",
    "Ownership",
    "StatusClient",
    "StatusEchoes",
    "add_finalizer",
    "apply_configuration",
    "condition_setter",
    "contains_finalizer",
    "controller_reference",
    "create_or_patch",
    "create_or_update",
    "find_condition",
    "is_controlled_by",
    "leaf_paths",
    "merge_patch",
    "merge_status",
    "parse_time",
    "remove_finalizer",
    "rfc3339",
    "set_condition",
    "set_controller_reference",
    "write_status",
]


if not TYPE_CHECKING:  # mypy reads the imports above, so a misspelt name stays an error
    __getattr__, __dir__ = exports(globals(), type_checking_homes(globals()))
