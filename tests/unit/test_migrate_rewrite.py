"""The storage move's no-op rewrite of one object (``migrate.rewrite``, and the second
write of those written before the switch settled), against a stub
API: a write the server skipped (resourceVersion unchanged) is sent again while the
storage switch may still be settling and accepted after it; conflicts re-read; a
deleted object counts as not rewritten; an object that keeps changing is named."""

from __future__ import annotations

import time
from typing import Any, cast

import pytest

from cronjob_operator import migrate
from cronjob_operator.runtime import RestClient, errors

KIND = migrate.VERSIONS["v2"]
CONFLICT = errors.Conflict({"message": "the object has been modified"}, code=409)


def cronjob(resource_version: str) -> dict[str, Any]:
    return {
        "metadata": {"namespace": "team", "name": "nightly", "resourceVersion": resource_version}
    }


class StubApi:
    """Answers each PUT with the next of ``answers`` (a resourceVersion, or an error to
    raise); a GET returns the object at resourceVersion ``"re-read"``."""

    def __init__(self, *answers: str | Exception) -> None:
        self.answers = list(answers)
        self.puts: list[str] = []

    def request(self, method: str, path: str, body: Any = None, **_: Any) -> dict[str, Any]:
        assert path == KIND.object_path("team", "nightly")
        if method == "GET":
            return cronjob("re-read")
        self.puts.append(body["metadata"]["resourceVersion"])
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return cronjob(answer)


def rewrite(api: StubApi, obj: dict[str, Any], until: float) -> bool:
    return migrate.rewrite(cast(RestClient, api), KIND, obj, retry_skipped_until=until)


@pytest.fixture(autouse=True)
def no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(migrate, "SETTLE_RETRY_INTERVAL", 0.0)


def test_a_write_that_moved_the_resource_version_is_done_at_once() -> None:
    api = StubApi("2")
    assert rewrite(api, cronjob("1"), time.monotonic() + 60)
    assert api.puts == ["1"]


def test_a_skipped_write_is_sent_again_until_one_is_written_while_settling() -> None:
    api = StubApi("1", "1", "1", "2")
    assert rewrite(api, cronjob("1"), time.monotonic() + 60)
    assert api.puts == ["1", "1", "1", "1"]


def test_a_skipped_write_after_the_settling_counts_as_already_moved() -> None:
    api = StubApi("1")
    assert rewrite(api, cronjob("1"), time.monotonic() - 1)
    assert api.puts == ["1"]


def test_a_conflict_re_reads_and_writes_the_object_as_it_is_now() -> None:
    api = StubApi(CONFLICT, "3")
    assert rewrite(api, cronjob("1"), time.monotonic() + 60)
    assert api.puts == ["1", "re-read"]


def test_an_object_deleted_meanwhile_is_not_counted() -> None:
    assert not rewrite(StubApi(errors.NotFound({"message": "gone"}, code=404)), cronjob("1"), 0.0)


def test_an_object_that_keeps_changing_is_named_with_what_to_do() -> None:
    api = StubApi(*[CONFLICT] * migrate.MAX_CONFLICTS)
    with pytest.raises(migrate.MigrationError, match=r"team/nightly changed 10 times.*rerun"):
        rewrite(api, cronjob("1"), 0.0)


def test_objects_written_before_the_switch_settled_are_written_again_as_they_are_now() -> None:
    api = StubApi(CONFLICT, "3")
    migrate._rewrite_again(cast(RestClient, api), KIND, [cronjob("1")], time.monotonic() - 1)
    assert api.puts == ["1", "re-read"]
