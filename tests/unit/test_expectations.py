"""The created Jobs a reconciler expects in its cache (``expectations.py``): kept until
the cache lists them, read live once relied on, dropped when deleted or gone."""

from __future__ import annotations

from cronjob_operator.controllers.cronjob.expectations import CreatedJobs
from cronjob_operator.runtime import objects

KEY = ("ns", "c0")


def job(name: str, uid: str, **status: str) -> objects.Obj:
    return objects.freeze(
        {"metadata": {"name": name, "namespace": "ns", "uid": uid}, "status": dict(status)}
    )


def never_read(job: objects.Obj) -> objects.Obj | None:
    raise AssertionError(f"{objects.name_of(job)} read live")


def test_an_unlisted_job_is_added_as_created_without_a_read() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    assert [objects.name_of(j) for j in created.with_unlisted(KEY, [], never_read)] == ["a"]


def test_a_listed_job_ends_its_expectation() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    listed = [job("a", "1", phase="listed")]
    assert created.with_unlisted(KEY, listed, never_read) == listed
    assert created.with_unlisted(KEY, [], never_read) == []


def test_a_job_still_unlisted_after_one_reconcile_is_read_live() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    created.with_unlisted(KEY, [], never_read)
    fresh = job("a", "1", phase="live")
    assert created.with_unlisted(KEY, [], lambda _: fresh) == [fresh]
    assert created.with_unlisted(KEY, [], lambda _: None) == []  # gone: forgotten
    assert created.with_unlisted(KEY, [], never_read) == []


def test_a_deleted_or_forgotten_job_is_no_longer_expected() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    created.expect(KEY, job("b", "2"))
    created.deleted(KEY, "a")
    assert [objects.name_of(j) for j in created.with_unlisted(KEY, [], never_read)] == ["b"]
    created.forget(KEY)
    assert created.with_unlisted(KEY, [], never_read) == []


def test_expectations_are_kept_per_cronjob() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    assert created.with_unlisted(("ns", "other"), [], never_read) == []
    assert len(created.with_unlisted(KEY, [], never_read)) == 1
