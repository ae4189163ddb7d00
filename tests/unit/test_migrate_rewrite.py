"""The storage move's no-op rewrite of one object (``migrate.rewrite``, and the second
write of those written before the switch settled), against a stub
API: a write the server skipped (resourceVersion unchanged) is sent again while the
storage switch may still be settling and accepted after it; conflicts re-read; a
deleted object counts as not rewritten; an object that keeps changing is named.

And the whole walk (``migrate.migrate_storage``) against a stub cluster: an object the
API server refuses to write back is skipped and named with the server's reason, the
others are rewritten, and ``storedVersions`` is not trimmed, by that run nor by a later
one resumed with ``--continue``; a run from the first page that skips nothing trims it."""

from __future__ import annotations

import copy
import time
from typing import Any, cast

import pytest

from cronjob_operator import cli, migrate, runtime
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
    walk = migrate._Walk(cast(RestClient, api), "v2", lambda skipped: None, time.monotonic() - 1)
    walk.early = [cronjob("1")]
    walk.write_early_ones_again()
    assert api.puts == ["1", "re-read"]


# --- the whole walk ------------------------------------------------------------------------

REFUSAL = (
    'admission webhook "vcronjob-v1.kb.io" denied the request: CronJob "bad" is invalid: '
    'spec.schedule: Invalid value: "60 * * * *": minute 60 is out of range 0-59'
)


class StubCluster:
    """The CRD (v1 stored, v2 served), discovery, and CronJobs ``names`` in namespace
    ``team``, listed by pages; a PUT of a name in ``refused`` is answered 422."""

    def __init__(self, names: list[str], refused: set[str]) -> None:
        self.names, self.refused = names, refused
        self.puts: list[str] = []
        self.crd: dict[str, Any] = {
            "metadata": {"name": "cronjobs.batch.tutorial.kubebuilder.io", "resourceVersion": "1"},
            "spec": {
                "versions": [
                    {"name": "v1", "served": True, "storage": True},
                    {"name": "v2", "served": True, "storage": False},
                ]
            },
            "status": {"storedVersions": ["v1", "v2"]},
        }

    def request(self, method: str, path: str, body: Any = None, **options: Any) -> Any:
        if path == migrate.CRD_PATH:
            return self._crd(method, body)
        if path == f"{migrate.CRD_PATH}/status":
            self.crd["status"] = body["status"]
            return self.crd
        if path == f"/apis/{KIND.api_version}":
            return {"resources": [{"name": KIND.plural, "storageVersionHash": self._hash()}]}
        if path == KIND.collection_path():
            return self._page(**options["params"])
        assert method == "PUT", (method, path)
        name = body["metadata"]["name"]
        self.puts.append(name)
        if name in self.refused:
            raise errors.Invalid({"message": REFUSAL, "reason": "Invalid"}, code=422)
        return {"metadata": body["metadata"] | {"resourceVersion": "2"}}

    def _crd(self, method: str, body: Any) -> dict[str, Any]:
        if method == "PATCH" and isinstance(body, list):  # the storage flags
            for op in body[1:]:
                index = int(op["path"].split("/")[3])
                self.crd["spec"]["versions"][index]["storage"] = op["value"]
        elif method == "PATCH":  # a merge patch of the annotations
            annotations = self.crd["metadata"].setdefault("annotations", {})
            for key, value in body["metadata"]["annotations"].items():
                if value is None:
                    annotations.pop(key, None)
                else:
                    annotations[key] = value
        return copy.deepcopy(self.crd)

    def _hash(self) -> str:
        stored = next(v["name"] for v in self.crd["spec"]["versions"] if v["storage"])
        return migrate.storage_version_hash(KIND.group, stored, KIND.kind)

    def _page(self, limit: int, **params: str) -> dict[str, Any]:
        start = int(params.get("continue", "0"))
        end = start + limit
        items = [
            cronjob("1") | {"metadata": {**cronjob("1")["metadata"], "name": name}}
            for name in self.names[start:end]
        ]
        return {"metadata": {"continue": str(end) if end < len(self.names) else ""}, "items": items}

    @property
    def stored_versions(self) -> list[str]:
        return list(self.crd["status"]["storedVersions"])

    @property
    def marked(self) -> bool:
        return migrate.SKIPPED_ANNOTATION in self.crd["metadata"].get("annotations", {})


def migrate_over(cluster: StubCluster, **options: Any) -> migrate.MigrationResult:
    return migrate.migrate_storage(cast(RestClient, cluster), "v2", **options)


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch counts as settled at once: no write is repeated."""
    monkeypatch.setattr(migrate, "STORAGE_SETTLE", 0.0)


@pytest.mark.usefixtures("settled")
def test_a_refused_object_is_skipped_and_named_and_the_others_are_rewritten() -> None:
    cluster = StubCluster(["a", "bad", "c"], refused={"bad"})
    reported: list[migrate.Skipped] = []
    result = migrate_over(cluster, on_skip=reported.append)
    assert cluster.puts == ["a", "bad", "c"]
    assert result.migrated == 2
    assert result.skipped == (migrate.Skipped("team", "bad", f"{REFUSAL} (HTTP 422, Invalid)"),)
    assert reported == list(result.skipped)
    assert str(reported[0]).startswith('CronJob team/bad: admission webhook "vcronjob-v1.kb.io"')
    assert result.continue_token is None
    assert not result.trimmed
    assert cluster.stored_versions == ["v1", "v2"], "a skipped object is still stored as v1"
    assert cluster.marked


@pytest.mark.usefixtures("settled")
def test_a_run_resumed_after_a_skip_does_not_trim_and_one_from_the_start_does() -> None:
    cluster = StubCluster(["bad", "b", "c", "d"], refused={"bad"})
    first = migrate_over(cluster, page_size=2, max_pages=1)
    assert [s.name for s in first.skipped] == ["bad"]
    assert first.continue_token == "2"

    resumed = migrate_over(cluster, page_size=2, continue_token=first.continue_token)
    assert (resumed.migrated, resumed.skipped, resumed.trimmed) == (2, (), False)
    assert cluster.stored_versions == ["v1", "v2"]

    cluster.refused.clear()  # the user fixed it
    again = migrate_over(cluster, page_size=2)
    assert (again.migrated, again.skipped, again.trimmed) == (4, (), True)
    assert cluster.stored_versions == ["v2"]
    assert not cluster.marked


@pytest.mark.usefixtures("settled")
def test_a_failure_that_is_not_one_objects_stops_the_walk() -> None:
    cluster = StubCluster(["a", "b"], refused=set())

    def unavailable(method: str, path: str, body: Any = None, **options: Any) -> Any:
        if method == "PUT":
            raise errors.ServerError({"message": "etcdserver: request timed out"}, code=500)
        return StubCluster.request(cluster, method, path, body, **options)

    cluster.request = unavailable  # type: ignore[method-assign]
    with pytest.raises(errors.ServerError):
        migrate_over(cluster)
    assert cluster.stored_versions == ["v1", "v2"]


@pytest.mark.usefixtures("settled")
def test_the_command_names_each_skipped_object_and_ends_with_a_summary_and_status_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = StubCluster(["a", "bad", "c"], refused={"bad"})
    monkeypatch.setattr(runtime, "load_configuration", lambda path: None)
    monkeypatch.setattr(runtime, "RestClient", lambda configuration, user_agent: cluster)
    monkeypatch.setattr(StubCluster, "close", lambda self: None, raising=False)

    code = cli.main(["migrate-storage", "--to", "v2"])
    out, err = capsys.readouterr()
    assert code == 1
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert skipped == [f"migrate-storage: skipped CronJob team/bad: {REFUSAL} (HTTP 422, Invalid)"]
    assert "Traceback" not in err
    summary = out.strip()
    assert summary.startswith("2 CronJobs rewritten as v2 in ")
    assert "1 skipped (refused by the API server, each named above)" in summary
    assert "storedVersions left as it was" in summary
    assert "migrate-storage --to v2 again from the first page" in summary
