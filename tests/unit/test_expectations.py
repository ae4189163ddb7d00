"""What a reconciler expects its cache to show (``expectations.py``): created Jobs, kept
until the cache lists them, read live once relied on, dropped when deleted or gone; its
last status write, decided from until the cache holds another version."""

from __future__ import annotations

from cronjob_operator.controllers.cronjob.expectations import CreatedJobs, StatusWrites
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


def cronjob(version: str, **status: str) -> objects.Obj:
    metadata = {"name": "c0", "namespace": "ns", "resourceVersion": version}
    return objects.freeze({"metadata": metadata, "status": dict(status)})


def test_our_write_is_decided_from_while_the_cache_holds_the_copy_it_came_from() -> None:
    writes = StatusWrites()
    lagging, written = cronjob("1"), cronjob("2", lastScheduleTime="t")
    writes.expect(KEY, lagging, written)
    assert writes.latest(lagging) is written
    assert writes.latest(lagging) is written  # as long as the cache lags
    writes.observed(lagging)  # a resync of the same copy: still on its way
    assert writes.latest(lagging) is written


def test_our_write_is_forgotten_once_the_cache_holds_another_version() -> None:
    writes = StatusWrites()
    lagging, written = cronjob("1"), cronjob("2", lastScheduleTime="t")
    writes.expect(KEY, lagging, written)
    writes.observed(written)  # the echo
    assert KEY not in writes
    assert writes.latest(lagging) is lagging


def test_a_read_of_another_version_forgets_our_write() -> None:
    writes = StatusWrites()
    writes.expect(KEY, cronjob("1"), cronjob("2"))
    newer = cronjob("3")
    assert writes.latest(newer) is newer
    assert KEY not in writes
    writes.expect(KEY, cronjob("3"), cronjob("4"))
    writes.forget(KEY)
    assert KEY not in writes


def test_a_create_with_no_clear_answer_is_read_live_at_once_by_name() -> None:
    created = CreatedJobs()
    created.maybe_created(KEY, job("a", ""))
    stored = job("a", "7", phase="live")
    assert created.with_unlisted(KEY, [], lambda _: stored) == [stored]
    assert created.with_unlisted(KEY, [stored], never_read) == [stored]
    assert created.with_unlisted(KEY, [], never_read) == []


def test_a_create_with_no_clear_answer_whose_job_was_never_stored_ends() -> None:
    created = CreatedJobs()
    created.maybe_created(KEY, job("a", ""))
    assert created.with_unlisted(KEY, [], lambda _: None) == []
    assert created.with_unlisted(KEY, [], never_read) == []


def test_a_create_with_no_clear_answer_ends_when_the_cache_lists_its_name() -> None:
    created = CreatedJobs()
    created.maybe_created(KEY, job("a", ""))
    listed = [job("a", "7")]
    assert created.with_unlisted(KEY, listed, never_read) == listed
    assert created.with_unlisted(KEY, [], never_read) == []


def test_each_expected_job_is_judged_on_its_own_when_the_cache_lists_one_of_them() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    created.expect(KEY, job("b", "2"))
    listed = [job("a", "1", phase="listed")]
    found = created.with_unlisted(KEY, listed, never_read)
    assert [objects.name_of(j) for j in found] == ["a", "b"]


def test_each_expected_job_is_judged_on_its_own_when_one_of_them_is_gone() -> None:
    created = CreatedJobs()
    created.expect(KEY, job("a", "1"))
    created.expect(KEY, job("b", "2"))
    created.with_unlisted(KEY, [], never_read)
    live = {"b": job("b", "2", phase="live")}
    found = created.with_unlisted(KEY, [], lambda j: live.get(objects.name_of(j)))
    assert [objects.name_of(j) for j in found] == ["b"]
