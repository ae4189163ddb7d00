"""``controllers.stored``'s schema check at the edges its rules draw: a value at a bound
fits and one past it does not, a required field absent or null, a null field against a
null entry, and which misfit is reported when an object holds several.

The stored-object fuzzer (test_stored_object_fuzz.py) stores one hostile value at a time,
each past a rule; these pin what it cannot see: the values just inside each bound, and
the order of the walk. On the CronJob's own schema, through the public ``misfit``.
"""

from __future__ import annotations

from typing import Any

from cronjob_operator.api.batch_v1 import CRONJOB, CRONJOB_RESOURCE
from cronjob_operator.controllers.stored import Misfit, misfit

EVERY_MINUTE = "* * * * *"


def cronjob(**spec: Any) -> dict[str, Any]:
    """A well-formed CronJob with ``spec``'s fields set (None stores a null)."""
    template = {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}
    return {
        "apiVersion": CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": "nightly", "namespace": "tenant", "uid": "uid-1"},
        "spec": {"schedule": EVERY_MINUTE, "jobTemplate": {"spec": {"template": template}}} | spec,
    }


def test_the_well_formed_cronjob_fits() -> None:
    assert misfit(cronjob(), CRONJOB_RESOURCE) is None


def test_a_string_at_its_max_length_fits_and_one_past_it_does_not() -> None:
    assert misfit(cronjob(timeZone="x" * 64), CRONJOB_RESOURCE) is None
    assert misfit(cronjob(timeZone="x" * 65), CRONJOB_RESOURCE) == Misfit(
        "spec.timeZone", "65 characters long, more than 64"
    )


def test_a_list_at_its_max_items_fits_and_one_past_it_does_not() -> None:
    assert misfit(cronjob(schedules=[EVERY_MINUTE] * 10), CRONJOB_RESOURCE) is None
    assert misfit(cronjob(schedules=[EVERY_MINUTE] * 11), CRONJOB_RESOURCE) == Misfit(
        "spec.schedules", "11 entries, more than 10"
    )


def test_a_required_field_absent_or_null_is_reported_by_its_parent() -> None:
    absent = Misfit("spec.concurrencyGroup.name", "required, but absent")
    assert misfit(cronjob(concurrencyGroup={}), CRONJOB_RESOURCE) == absent
    assert misfit(cronjob(concurrencyGroup={"name": None}), CRONJOB_RESOURCE) == absent
    assert misfit(cronjob(concurrencyGroup={"name": "batch"}), CRONJOB_RESOURCE) is None


def test_a_null_field_reads_as_absent_and_a_null_entry_is_a_misfit() -> None:
    assert misfit(cronjob(timeZone=None), CRONJOB_RESOURCE) is None
    assert misfit(cronjob(schedules=[EVERY_MINUTE, None]), CRONJOB_RESOURCE) == Misfit(
        "spec.schedules[1]", "stored as null"
    )


def misfit_field(obj: dict[str, Any]) -> str | None:
    """The field of the misfit reported for ``obj``, if any."""
    found = misfit(obj, CRONJOB_RESOURCE)
    return None if found is None else found.field


def test_of_several_misfits_the_first_in_schema_order_is_reported() -> None:
    assert misfit_field(cronjob(schedules=[1, 2])) == "spec.schedules[0]"
    assert misfit_field(cronjob(schedule=1, timeZone=2)) == "spec.schedule"


def test_the_spec_is_checked_before_the_status() -> None:
    obj = cronjob(timeZone=2) | {"status": {"lastHandledRunRequest": 3}}
    assert misfit_field(obj) == "spec.timeZone"
