"""What the CronJob reconciler does when the API server refuses it, on the runtime's fake
client with the failures a real API server gives injected by its reactors: a Replace whose
delete or get fails (a 500, a 409 uid precondition) creates nothing, a Job template the
API server rejects and a namespace being terminated make the CronJob not Available (the
latter quietly), a refusal for another cause stays an error; and a CronJob being deleted
is not Available either.

The real-cluster versions of these behaviours are in
tests/integration/test_cronjob_controller.py.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator.api.batch_v1 import CRONJOB
from cronjob_operator.controllers.cronjob.jobs import job_name
from cronjob_operator.runtime import errors
from cronjob_operator.runtime.controller import Result
from cronjob_operator.runtime.fake import Action
from cronjob_operator.runtime.kinds import JOB
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness

CREATED = datetime(2016, 5, 19, 9, 59, tzinfo=UTC)
FIRST = datetime(2016, 5, 19, 10, tzinfo=UTC)
NS, NAME = "ns", "swap"


def failure(error: type[errors.ApiError], code: int) -> errors.ApiError:
    return error({"reason": error.__name__, "message": f"injected {code}"}, code=code)


def replace_cronjob(**spec: Any) -> dict[str, Any]:
    """An hourly CronJob with concurrencyPolicy Replace (``spec`` overrides)."""
    return cronjob_harness.cronjob(
        NAME,
        NS,
        created=CREATED,
        spec={"schedule": "0 * * * *", "concurrencyPolicy": "Replace", **spec},
    )


def harness(cronjob: dict[str, Any]) -> Harness:
    return Harness(cronjob, start=CREATED, namespace=NS, name=NAME)


def first_run_active() -> Harness:
    world = harness(replace_cronjob())
    world.reconcile_at(FIRST + timedelta(minutes=1))
    assert list(world.jobs()) == [job_name(NAME, FIRST)]
    return world


SECOND = FIRST + timedelta(hours=1)


@pytest.mark.parametrize(
    "error",
    [failure(errors.ServerError, 500), failure(errors.Conflict, 409)],
    ids=["500", "409 uid precondition"],
)
def test_a_failed_delete_stops_the_replace_before_anything_is_created(
    error: errors.ApiError,
) -> None:
    world = first_run_active()
    old = job_name(NAME, FIRST)
    failing = {old: error}
    world.client.prepend_reactor("delete", JOB, lambda action: failing.get(action.name))
    with pytest.raises(type(error)):  # the controller retries with backoff
        world.reconcile_at(SECOND + timedelta(minutes=1))
    assert list(world.jobs()) == [old]
    created = [action.name for action in world.client.writes_of("create", JOB)]
    assert job_name(NAME, SECOND) not in created
    assert [ref["name"] for ref in world.status()["active"]] == [old]
    assert "FailedDelete" in world.recorder.reasons()

    del failing[old]  # the retry, once the delete works
    world.reconcile_at(SECOND + timedelta(minutes=1))
    assert list(world.jobs()) == [job_name(NAME, SECOND)]


def test_a_failed_get_of_the_old_job_stops_the_replace() -> None:
    world = first_run_active()
    old = job_name(NAME, FIRST)
    world.client.delete(JOB, old, namespace=NS)  # not in the cache: the reconciler asks the server
    failed = failure(errors.ServerError, 500)
    world.client.prepend_reactor("get", JOB, lambda action: failed if action.name == old else None)
    reads, writes = len(world.client.reads), len(world.client.writes)
    with pytest.raises(errors.ServerError):
        world.reconcile_at(SECOND + timedelta(minutes=1))
    assert [(a.verb, a.kind, a.name) for a in world.client.reads[reads:]] == [
        ("get", CRONJOB, NAME),
        ("list", JOB, ""),
        ("get", JOB, old),
    ]
    assert world.client.writes[writes:] == [], "nothing deleted or created"


def test_a_cronjob_being_deleted_is_not_available() -> None:
    world = first_run_active()
    world.clock.set(FIRST + timedelta(minutes=30))
    world.delete(finalizers=["example.com/hold"])
    world.reconcile_at(SECOND + timedelta(minutes=1))
    available = world.condition("Available")
    assert (available["status"], available["reason"]) == ("False", "Terminating")
    assert "metadata.deletionTimestamp" in available["message"]
    assert "example.com/hold" in available["message"]
    assert list(world.jobs()) == [job_name(NAME, FIRST)], "no new run while deleting"


def test_a_job_template_the_api_server_rejects_is_not_available() -> None:
    world = harness(replace_cronjob())
    invalid = errors.Invalid(
        {"reason": "Invalid", "message": 'Job.batch "x" is invalid: spec.template: bad'},
        code=422,
    )
    world.client.prepend_reactor("create", JOB, lambda _: invalid)  # every Job create
    world.reconcile_at(FIRST + timedelta(minutes=1))
    available = world.condition("Available")
    assert (available["status"], available["reason"]) == ("False", "InvalidJobTemplate")
    assert "spec.jobTemplate" in available["message"]
    degraded = world.condition("Degraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "InvalidJobTemplate")
    assert "FailedCreate" in world.recorder.reasons()


# --- the namespace is being deleted ----------------------------------------------------------


def namespace_terminating(action: Action) -> errors.ApiError:
    """The API server's answer to a create in a terminating namespace."""
    message = (
        f"unable to create new content in namespace {action.namespace} because it is being "
        "terminated"
    )
    cause = {
        "reason": "NamespaceTerminating",  # a StatusCause's type, as JSON
        "message": f"namespace {action.namespace} is being terminated",
    }
    return errors.api_error(
        403,
        {
            "reason": "Forbidden",
            "message": message,
            "details": {"name": action.name, "causes": [cause]},
        },
    )


def test_a_create_in_a_terminating_namespace_warns_nothing_and_is_not_retried() -> None:
    world = harness(replace_cronjob())
    world.client.prepend_reactor("create", JOB, namespace_terminating)
    result = world.reconcile_at(FIRST + timedelta(minutes=1))  # no error: no backoff loop
    assert result == Result(), "nothing to retry: the namespace never comes back"
    assert world.recorder.reasons() == []
    assert world.jobs() == {}
    available = world.condition("Available")
    assert (available["status"], available["reason"]) == ("False", "NamespaceTerminating")
    writes = len(world.client.writes)
    world.reconcile_at(FIRST + timedelta(minutes=2))  # another event: the same, quietly
    assert world.recorder.reasons() == []
    assert len(world.client.writes) == writes + 1, "one more create attempt, no status write"


def test_a_forbidden_create_for_another_cause_is_still_an_error() -> None:
    world = harness(replace_cronjob())
    denied = errors.api_error(403, {"reason": "Forbidden", "message": "jobs is forbidden"})
    world.client.prepend_reactor("create", JOB, lambda _: denied)
    with pytest.raises(errors.Forbidden):
        world.reconcile_at(FIRST + timedelta(minutes=1))
    assert world.recorder.reasons() == ["FailedCreate"]


def test_status_causes_are_read_from_the_details() -> None:
    terminating = namespace_terminating(Action("create", JOB, NS, "x"))
    assert errors.has_status_cause(terminating, errors.NAMESPACE_TERMINATING_CAUSE)
    assert not errors.has_status_cause(terminating, "FieldValueInvalid")
    assert not errors.has_status_cause(errors.api_error(403, {"details": {}}), "X")
    assert not errors.has_status_cause(errors.api_error(403, {"details": "junk"}), "X")
    assert not errors.has_status_cause(ValueError("not an API error"), "X")


def test_replace_deletes_the_active_job_only_while_it_is_the_run_recorded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The delete carries the active entry's uid as a precondition, so a Job that took
    the name since (another uid) is refused by the API server, never deleted."""
    world = first_run_active()
    (entry,) = world.status()["active"]
    deletes: list[tuple[str, str | None]] = []
    delete = world.client.delete

    def spy(kind: Any, name: str, **options: Any) -> None:
        deletes.append((name, options.get("uid")))
        delete(kind, name, **options)

    monkeypatch.setattr(world.client, "delete", spy)
    world.reconcile_at(SECOND + timedelta(minutes=1))
    assert deletes == [(entry["name"], entry["uid"])]
    assert list(world.jobs()) == [job_name(NAME, SECOND)]
