"""Run now with overrides (issue 40, item 4): the request's JSON, its checks, the Job it
makes, the decision on the fake client, the webhook, and the plugin's flags; a variable
from a Secret's or ConfigMap's key, named and never resolved (issue 47, item 4).

Every time is chosen (the harness's injected clock); no cluster is needed.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cronjob_operator import plugin
from cronjob_operator.api import run_overrides
from cronjob_operator.api.batch_v1 import RUN_ANNOTATION
from cronjob_operator.api.cronjob_rules import TOKEN_FIELD, manual_job_name
from cronjob_operator.api.meta import Condition
from cronjob_operator.api.run_overrides import (
    MAX_RUN_REQUEST_LENGTH,
    OVERRIDES_ANNOTATION,
    ContainerOverride,
    KeyRef,
    KeySource,
    Overrides,
    RunRequest,
    overridden_spec,
    overrides_json,
    overrides_summary,
    parse_overrides_json,
    parse_run_request,
    request_json,
    request_problem,
)
from cronjob_operator.controllers.cronjob import requests
from cronjob_operator.controllers.cronjob.jobs import build_manual_job, job_name
from cronjob_operator.runtime.objects import MAX_MESSAGE_LENGTH, freeze, thaw
from cronjob_operator.webhooks import cronjob as webhook
from tests.unit import cronjob_harness
from tests.unit.cronjob_harness import Harness
from tests.unit.test_cronjob_requests_and_conditions import reconcile, request_run

CREATED = datetime(2016, 5, 19, 9, 59, tzinfo=UTC)

CONTAINERS: list[dict[str, Any]] = [
    {
        "name": "main",
        "image": "busybox:1.36",
        "args": ["--quick"],
        "env": [
            {"name": "LEVEL", "value": "info"},
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        ],
    },
    {"name": "side", "image": "envoy:1"},
]
JOB_SPEC: dict[str, Any] = {"template": {"spec": {"containers": CONTAINERS}}}

PASSWORD = KeyRef(KeySource.SECRET, "db", "password")
LEVEL = KeyRef(KeySource.CONFIG_MAP, "app.config", "log.level", optional=True)
REFS = Overrides(
    env=(("TOKEN", PASSWORD),),
    containers=(ContainerOverride("main", env=(("LEVEL", LEVEL),)),),
)
"""Overrides naming a Secret's key in every container and a ConfigMap's in one."""

FULL = Overrides(
    env=(("DRY_RUN", "1"), ("TOKEN", "plain")),
    containers=(
        ContainerOverride(
            name="main", image="busybox:1.37", args=("--full",), env=(("LEVEL", "debug"),)
        ),
    ),
)


def problem_of(value: Any) -> str:
    """The problem parse_run_request reports for the JSON of ``value``."""
    parsed = parse_run_request(value if isinstance(value, str) else json.dumps(value))
    assert isinstance(parsed, str), parsed
    assert parsed.startswith(TOKEN_FIELD)
    return parsed


# --- parsing --------------------------------------------------------------------------


def test_a_plain_token_is_a_request_without_overrides() -> None:
    assert parse_run_request("2026-12-06T04:00:00Z") == RunRequest("2026-12-06T04:00:00Z")
    assert "256" in problem_of("x" * 257)


def test_the_json_form_round_trips_through_request_json() -> None:
    raw = request_json("t1", FULL)
    assert parse_run_request(raw) == RunRequest("t1", FULL)
    assert parse_overrides_json(overrides_json(FULL)) == FULL
    assert parse_run_request('{"token": "t2"}') == RunRequest("t2")


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ({"token": "t", "overrides": "x"}, "overrides must be a JSON object"),
        ({"overrides": {}}, "token must be a string"),
        ({"token": ""}, "token must be a string of 1 to 256"),
        ({"token": "x" * 257}, "257 characters"),
        ({"token": "t", "extra": 1}, "unknown field 'extra'"),
        ({"token": "t", "overrides": {"image": "x"}}, "overrides: unknown field 'image'"),
        ({"token": "t", "overrides": {"env": {"A": "1"}}}, "overrides.env must be a JSON list"),
        (
            {"token": "t", "overrides": {"env": [{"name": "A=B", "value": "1"}]}},
            "overrides.env[0].name must be a variable name",
        ),
        (
            {"token": "t", "overrides": {"env": [{"name": "A", "value": 1}]}},
            'overrides.env[0].value must be a string (quote numbers: "1")',
        ),
        (
            {"token": "t", "overrides": {"containers": [{"image": "x"}]}},
            "overrides.containers[0].name must name a container",
        ),
        (
            {"token": "t", "overrides": {"containers": [{"name": "c", "image": " x"}]}},
            "overrides.containers[0].image must be an image reference",
        ),
        (
            {"token": "t", "overrides": {"containers": [{"name": "c", "args": "a b"}]}},
            "overrides.containers[0].args must be a list of strings",
        ),
        (
            {"token": "t", "overrides": {"containers": [{"name": "c"}, {"name": "c"}]}},
            "overrides.containers[1].name: 'c' is given twice",
        ),
    ],
)
def test_a_bad_request_names_the_field_and_the_fix(value: Any, names: str) -> None:
    assert names in problem_of(value)


# --- variables from a Secret's or a ConfigMap's key ------------------------------------


def env_request(*entries: Any) -> dict[str, Any]:
    """A run request setting ``entries`` in every container."""
    return {"token": "t", "overrides": {"env": list(entries)}}


def secret_entry(**ref: Any) -> dict[str, Any]:
    return {"name": "TOKEN", "valueFrom": {"secretKeyRef": ref}}


def test_a_variable_may_name_a_secrets_or_config_maps_key() -> None:
    raw = json.dumps(
        {
            "token": "t",
            "overrides": {
                "env": [secret_entry(name="db", key="password")],
                "containers": [
                    {
                        "name": "main",
                        "env": [
                            {
                                "name": "LEVEL",
                                "valueFrom": {
                                    "configMapKeyRef": {
                                        "name": "app.config",
                                        "key": "log.level",
                                        "optional": True,
                                    }
                                },
                            }
                        ],
                    }
                ],
            },
        }
    )
    assert parse_run_request(raw) == RunRequest("t", REFS)
    assert parse_run_request(request_json("t", REFS)) == RunRequest("t", REFS)
    assert parse_overrides_json(overrides_json(REFS)) == REFS
    assert request_problem(request_json("t", REFS), JOB_SPEC) is None


@pytest.mark.parametrize(
    ("entry", "names"),
    [
        (
            {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            "overrides.env[0].valueFrom.fieldRef: not offered in a run override",
        ),
        (
            {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
            "overrides.env[0].valueFrom.resourceFieldRef: not offered in a run override",
        ),
        (
            {"name": "F", "valueFrom": {"fileKeyRef": {"path": "p", "key": "k"}}},
            "overrides.env[0].valueFrom: unknown source 'fileKeyRef'",
        ),
        (
            {"name": "TOKEN", "value": "x", "valueFrom": {"secretKeyRef": {}}},
            "overrides.env[0]: set value or valueFrom, not both",
        ),
        (
            {
                "name": "TOKEN",
                "valueFrom": {
                    "secretKeyRef": {"name": "s", "key": "k"},
                    "configMapKeyRef": {"name": "c", "key": "k"},
                },
            },
            "overrides.env[0].valueFrom must hold exactly one of configMapKeyRef, secretKeyRef",
        ),
        (
            {"name": "TOKEN", "valueFrom": {}},
            "overrides.env[0].valueFrom must hold exactly one of",
        ),
        (
            {"name": "TOKEN", "valueFrom": "db/password"},
            'overrides.env[0].valueFrom must be a JSON object: {"secretKeyRef": {"name": ',
        ),
        (
            secret_entry(name="db", key="password", namespace="other"),
            "overrides.env[0].valueFrom.secretKeyRef.namespace: a reference has no namespace",
        ),
        (
            secret_entry(key="password"),
            "overrides.env[0].valueFrom.secretKeyRef.name must name a Secret in the "
            "CronJob's namespace",
        ),
        (
            secret_entry(name="DB", key="password"),
            "overrides.env[0].valueFrom.secretKeyRef.name must name a Secret",
        ),
        (
            secret_entry(name="d" * 254, key="password"),
            "overrides.env[0].valueFrom.secretKeyRef.name must name a Secret",
        ),
        (
            {"name": "L", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "a/b"}}},
            "overrides.env[0].valueFrom.configMapKeyRef.key must be a key of that ConfigMap",
        ),
        (
            secret_entry(name="db", key=".."),
            "overrides.env[0].valueFrom.secretKeyRef.key must be a key of that Secret",
        ),
        (
            secret_entry(name="db", key="..x"),
            "overrides.env[0].valueFrom.secretKeyRef.key must be a key of that Secret",
        ),
        (
            secret_entry(name="db", key="k" * 254),
            "overrides.env[0].valueFrom.secretKeyRef.key must be a key of that Secret",
        ),
        (
            secret_entry(name="db"),
            "overrides.env[0].valueFrom.secretKeyRef.key must be a key of that Secret",
        ),
        (
            secret_entry(name="db", key="k", optional="yes"),
            "overrides.env[0].valueFrom.secretKeyRef.optional must be true or false",
        ),
        (
            secret_entry(name="db", key="k", extra=1),
            "overrides.env[0].valueFrom.secretKeyRef: unknown field 'extra'",
        ),
    ],
)
def test_a_bad_value_from_names_the_field_and_the_fix(entry: Any, names: str) -> None:
    assert names in problem_of(env_request(entry))


def test_a_refused_value_from_says_where_it_may_go_instead() -> None:
    field_ref = {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    problem = problem_of(env_request(field_ref))
    assert "use secretKeyRef or configMapKeyRef" in problem
    assert "spec.jobTemplate.spec.template.spec.containers[].env" in problem
    missing = problem_of(env_request({"name": "TOKEN"}))
    assert "overrides.env[0].value must be a string" in missing
    assert '"valueFrom": {"secretKeyRef"' in missing, "the way to a secret is named"


def test_a_key_ref_sets_value_from_where_the_variable_stands_and_holds_no_value() -> None:
    spec = overridden_spec(JOB_SPEC, REFS)
    main, side = spec["template"]["spec"]["containers"]
    secret_ref = {"secretKeyRef": {"name": "db", "key": "password"}}
    config_ref = {"configMapKeyRef": {"name": "app.config", "key": "log.level", "optional": True}}
    assert main["env"] == [
        {"name": "LEVEL", "valueFrom": config_ref},  # a plain value replaced by a ref
        {"name": "TOKEN", "valueFrom": secret_ref},  # a ref replaced by another
    ]
    assert side["env"] == [{"name": "TOKEN", "valueFrom": secret_ref}]
    assert json.loads(overrides_json(REFS)) == {
        "env": [{"name": "TOKEN", "valueFrom": secret_ref}],
        "containers": [{"name": "main", "env": [{"name": "LEVEL", "valueFrom": config_ref}]}],
    }
    assert overrides_summary(REFS) == "env=TOKEN;main:env=LEVEL"


@pytest.mark.parametrize(
    "raw",
    [
        "{",
        "{" + "[" * 20_000,
        '{"token": ' + "[" * 15_000 + "]" * 15_000 + "}",
        '{"token": "t", "overrides": {"env": [' + '{"name":"A","value":"b"},' * 3000 + "]}}",
        "{\x00}",
        '{"token": "t\ud800"}',
    ],
)
def test_hostile_values_are_refused_without_raising(raw: str) -> None:
    problem = problem_of(raw)
    assert len(problem) < 1000, "the message does not echo the value"


def test_the_size_bound_is_checked_before_parsing() -> None:
    padding = " " * (MAX_RUN_REQUEST_LENGTH - len('{"token": "t"}') + 1)
    assert f"at most {MAX_RUN_REQUEST_LENGTH}" in problem_of('{"token": "t"}' + padding)
    assert parse_run_request('{"token": "t"}' + padding[1:]) == RunRequest("t")


def test_the_bound_counts_utf8_bytes_and_the_jobs_copy_is_no_larger() -> None:
    """A Job's annotations are limited in bytes: a request within the bound (8,000 emoji,
    32,000 bytes) makes a Job whose run-overrides annotation is no larger than the
    request (with \\u escapes it was 96,000), and 8,200 emoji (8,200 characters, 32,800
    bytes) are refused."""

    def raw_of(emoji: int) -> str:
        env = [{"name": "A", "value": "\U0001f600" * emoji}]
        return json.dumps({"token": "t", "overrides": {"env": env}}, ensure_ascii=False)

    raw = raw_of(8000)
    assert len(raw.encode()) <= MAX_RUN_REQUEST_LENGTH
    request = parse_run_request(raw)
    assert isinstance(request, RunRequest)
    cronjob = cronjob_harness.cronjob("cj", "ns", created=CREATED, spec={"schedule": "@hourly"})
    cronjob["metadata"]["uid"] = "uid-cj"
    job = build_manual_job(cronjob, request)
    recorded = job["metadata"]["annotations"][OVERRIDES_ANNOTATION]
    assert parse_overrides_json(recorded) == request.overrides
    assert len(recorded.encode()) <= len(raw.encode())
    assert len(request_json("t", request.overrides).encode()) <= len(raw.encode())
    too_large = raw_of(8200)
    assert len(too_large) < MAX_RUN_REQUEST_LENGTH < len(too_large.encode())
    assert f"{len(too_large.encode())} bytes (UTF-8), at most" in problem_of(too_large)


def test_an_oversized_value_is_not_remembered() -> None:
    """The memo of parsed requests holds only values within the bound (32 KiB each)."""
    before = run_overrides._parse_json_request.cache_info().currsize
    for size in (10**6, 10**6 + 1):
        problem_of('{"token": "t"}' + " " * size)
    assert run_overrides._parse_json_request.cache_info().currsize == before


def test_containers_must_be_the_templates() -> None:
    raw = request_json("t", Overrides(containers=(ContainerOverride("init", image="x"),)))
    problem = request_problem(raw, JOB_SPEC)
    assert problem is not None
    assert "overrides.containers[0].name" in problem
    assert "no container 'init' (it has main, side)" in problem
    assert request_problem(raw, None) is None, "without a template only the shape"
    assert request_problem(request_json("t", FULL), freeze(JOB_SPEC)) is None


# --- applying -------------------------------------------------------------------------


def test_overrides_replace_image_and_args_and_set_env_as_kubectl_set_env() -> None:
    spec = overridden_spec(JOB_SPEC, FULL)
    main, side = spec["template"]["spec"]["containers"]
    assert main["image"] == "busybox:1.37"
    assert main["args"] == ["--full"]
    assert main["env"] == [
        {"name": "LEVEL", "value": "debug"},  # replaced where it stood
        {"name": "TOKEN", "value": "plain"},  # its valueFrom too
        {"name": "DRY_RUN", "value": "1"},  # appended
    ]
    assert side == {
        "name": "side",
        "image": "envoy:1",
        "env": [{"name": "DRY_RUN", "value": "1"}, {"name": "TOKEN", "value": "plain"}],
    }
    assert JOB_SPEC["template"]["spec"]["containers"] == CONTAINERS, "the input is unchanged"
    assert overridden_spec(JOB_SPEC, Overrides()) == JOB_SPEC


def test_the_summary_shows_what_changed_without_values() -> None:
    assert overrides_summary(FULL) == "env=DRY_RUN,TOKEN;main:image=busybox:1.37,args,env=LEVEL"
    assert overrides_summary(Overrides()) == "-"


# --- the decision, on the fake client -------------------------------------------------


def harness(containers: list[dict[str, Any]] = CONTAINERS, **spec: Any) -> Harness:
    """The reconciler of ``ns/cj``, an hourly CronJob with ``containers`` and ``spec``."""
    cronjob = cronjob_harness.cronjob(
        "cj",
        "ns",
        created=CREATED,
        spec={"schedule": "0 * * * *", **spec},
        containers=[dict(c) for c in containers],
        annotations={},
    )
    return Harness(cronjob, start=CREATED, namespace="ns", name="cj")


def test_a_request_with_overrides_creates_its_job_with_them_recorded() -> None:
    cluster = harness(suspend=True)
    reconcile(cluster, CREATED)
    request_run(cluster, request_json("t1", FULL))
    status = reconcile(cluster, CREATED + timedelta(seconds=5))
    name = manual_job_name("cj", "t1")
    job = thaw(cluster.jobs()[name])
    assert job["spec"] == overridden_spec({"template": {"spec": {"containers": CONTAINERS}}}, FULL)
    assert parse_overrides_json(job["metadata"]["annotations"][OVERRIDES_ANNOTATION]) == FULL
    assert status["lastHandledRunRequest"] == "t1"
    # A plain token's Job has the template as written, and no overrides annotation.
    request_run(cluster, "t2")
    reconcile(cluster, CREATED + timedelta(seconds=6))
    plain = thaw(cluster.jobs()[manual_job_name("cj", "t2")])
    assert plain["spec"]["template"]["spec"]["containers"] == CONTAINERS
    assert OVERRIDES_ANNOTATION not in plain["metadata"]["annotations"]


def test_a_request_naming_a_secret_creates_its_job_without_reading_the_secret() -> None:
    """The Job carries the reference; the kubelet reads the Secret, the operator never:
    there is no Secret on the fake client, and the Job is made all the same."""
    cluster = harness(suspend=True)
    reconcile(cluster, CREATED)
    request_run(cluster, request_json("t1", REFS))
    reconcile(cluster, CREATED + timedelta(seconds=5))
    job = thaw(cluster.jobs()[manual_job_name("cj", "t1")])
    assert job["spec"] == overridden_spec(JOB_SPEC, REFS)
    assert parse_overrides_json(job["metadata"]["annotations"][OVERRIDES_ANNOTATION]) == REFS


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ('{"token": "t", "overrides": {"env": [{"name": "A"}]}}', "overrides.env[0].value"),
        (
            json.dumps(env_request({"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}})),
            "overrides.env[0].valueFrom.fieldRef: not offered",
        ),
        (
            request_json("t", Overrides(containers=(ContainerOverride("gone", args=()),))),
            "no container 'gone'",
        ),
    ],
)
def test_a_bad_request_is_degraded_with_an_event_and_runs_nothing(value: str, names: str) -> None:
    cluster = harness()
    request_run(cluster, value)
    result = cluster.reconcile_at(CREATED)
    status = thaw(cluster.status())
    degraded = next(c for c in status["conditions"] if c["type"] == "Degraded")
    assert degraded["reason"] == "InvalidRunRequest"
    assert degraded["message"].startswith(TOKEN_FIELD)
    assert names in degraded["message"]
    available = next(c for c in status["conditions"] if c["type"] == "Available")
    assert available["status"] == "True", "scheduled runs go on"
    assert cluster.jobs() == {}
    assert "lastHandledRunRequest" not in status
    assert cluster.recorder.reasons() == ["InvalidRunRequest"]
    assert result.requeue_after is not None
    assert result.requeue_after > 60, "no hot requeue: the next scheduled time"


def test_a_degraded_message_naming_every_container_fits_the_condition_schema() -> None:
    """Issue 47: the message names every container of the template; 640 names of 63
    characters made 40,000 characters, over the CRD's 32,768 for a condition message, so
    every status write of that CronJob was refused. Condition messages are clipped."""
    cluster = harness([{"name": f"c{i:03}-{'x' * 58}", "image": "x"} for i in range(640)])
    gone = Overrides(containers=(ContainerOverride("gone", image="x"),))
    request_run(cluster, request_json("t", gone))
    cluster.reconcile_at(CREATED)
    degraded = next(c for c in cluster.status()["conditions"] if c["type"] == "Degraded")
    allowed = Condition.model_json_schema()["properties"]["message"]["maxLength"]
    assert len(degraded["message"]) <= min(allowed, MAX_MESSAGE_LENGTH)
    assert degraded["message"].startswith(f"{TOKEN_FIELD}: overrides.containers[0].name")
    assert degraded["message"].endswith(" characters)")


def test_a_request_with_overrides_waits_under_forbid_and_runs_with_them() -> None:
    cluster = harness(concurrencyPolicy="Forbid")
    ten = CREATED + timedelta(minutes=1)
    reconcile(cluster, ten + timedelta(seconds=1))
    request_run(cluster, request_json("now", FULL))
    status = reconcile(cluster, ten + timedelta(seconds=2))
    assert status["pendingRunRequest"] == "now"
    assert list(cluster.jobs()) == [job_name("cj", ten)]
    cluster.finish(job_name("cj", ten), "Complete", at=ten + timedelta(seconds=30))
    status = reconcile(cluster, ten + timedelta(seconds=31))
    job = thaw(cluster.jobs()[manual_job_name("cj", "now")])
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "busybox:1.37"
    assert status["lastHandledRunRequest"] == "now"
    assert "pendingRunRequest" not in status


def test_a_handled_request_is_not_checked_again_against_the_template() -> None:
    """A template edit that drops a container an old, handled request named is not a
    problem: only an unhandled request is run."""
    raw = request_json("t", Overrides(containers=(ContainerOverride("gone", image="x"),)))
    cronjob = {
        "metadata": {"name": "cj", "annotations": {RUN_ANNOTATION: raw}},
        "spec": {"jobTemplate": {"spec": JOB_SPEC}},
        "status": {"lastHandledRunRequest": "t"},
    }
    assert requests.run_request(cronjob) is None
    assert requests.unrecorded_manual_job(cronjob) is None


# --- the webhook ----------------------------------------------------------------------


def cronjob_with(value: str | None, containers: list[dict[str, Any]]) -> dict[str, Any]:
    obj = cronjob_harness.cronjob(
        "cj",
        "ns",
        created=CREATED,
        spec={"schedule": "*/5 * * * *"},
        containers=containers,
        annotations={} if value is None else {RUN_ANNOTATION: value},
    )
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] = "Never"
    return obj


def webhook_messages(new: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    errors = webhook.validate_create(new) if old is None else webhook.validate_update(new, old)
    return [f"{e.field}: {e.detail}" for e in errors]


def test_the_webhook_refuses_a_bad_request_naming_the_field() -> None:
    assert webhook_messages(cronjob_with(request_json("t", FULL), CONTAINERS)) == []
    (shape,) = webhook_messages(cronjob_with('{"token": "t", "overrides": []}', CONTAINERS))
    assert shape.startswith(f"{TOKEN_FIELD}: overrides must be a JSON object")
    gone = request_json("t", Overrides(containers=(ContainerOverride("gone", image="x"),)))
    (container,) = webhook_messages(cronjob_with(gone, CONTAINERS))
    assert "no container 'gone'" in container
    assert webhook_messages(cronjob_with(request_json("t", REFS), CONTAINERS)) == []
    field_ref = {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    (refused,) = webhook_messages(cronjob_with(json.dumps(env_request(field_ref)), CONTAINERS))
    assert refused.startswith(f"{TOKEN_FIELD}: overrides.env[0].valueFrom.fieldRef: not offered")
    # An unchanged request is not held against a template edit (the controller reports
    # it if it is still to run).
    before = cronjob_with(request_json("t", FULL), CONTAINERS)
    after = cronjob_with(request_json("t", FULL), [{"name": "other", "image": "x"}])
    assert webhook_messages(after, before) == []


# --- the plugin's flags ---------------------------------------------------------------


def run_args(monkeypatch: pytest.MonkeyPatch, *argv: str) -> argparse.Namespace:
    """``kubectl cjt run cj ARGV`` parsed as ``main`` parses it (``--`` included)."""
    captured: list[argparse.Namespace] = []
    monkeypatch.setattr(plugin, "run", lambda args, _out: captured.append(args))
    assert plugin.main(["run", "cj", *argv]) == 0
    return captured[0]


def overrides_of(monkeypatch: pytest.MonkeyPatch, *argv: str) -> Overrides | None:
    """The overrides ``kubectl cjt run cj ARGV`` asks for against ``JOB_SPEC``."""
    return plugin.requested_overrides(run_args(monkeypatch, *argv), JOB_SPEC)


def test_the_plugin_flags_map_to_overrides_as_kubectl_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert overrides_of(monkeypatch) is None
    assert overrides_of(monkeypatch, "--env", "A=1", "--env", "B=x=y") == Overrides(
        env=(("A", "1"), ("B", "x=y"))
    )
    assert overrides_of(monkeypatch, "--image", "busybox:1.37", "--", "--full", "-v") == (
        Overrides(
            containers=(ContainerOverride("main", image="busybox:1.37", args=("--full", "-v")),)
        )
    )
    assert overrides_of(monkeypatch, "--", "") == Overrides(
        containers=(ContainerOverride("main", args=("",)),)
    )
    side = overrides_of(monkeypatch, "-c", "side", "--env", "A=1", "--image", "main=b:2", "--")
    assert side == Overrides(
        containers=(
            ContainerOverride("main", image="b:2"),
            ContainerOverride("side", args=(), env=(("A", "1"),)),
        )
    )


def test_the_plugin_names_a_secrets_or_config_maps_key_in_the_order_given(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    refs = overrides_of(
        monkeypatch,
        "--env",
        "A=1",
        "--env-from-secret",
        "TOKEN=db/password",
        "--env-from-configmap",
        "LEVEL=app.config/log.level",
        "--env",
        "B=2",
    )
    assert refs == Overrides(
        env=(
            ("A", "1"),
            ("TOKEN", PASSWORD),
            ("LEVEL", KeyRef(KeySource.CONFIG_MAP, "app.config", "log.level")),
            ("B", "2"),
        )
    )
    assert overrides_of(monkeypatch, "-c", "side", "--env-from-secret", "T=db/k") == Overrides(
        containers=(ContainerOverride("side", env=(("T", KeyRef(KeySource.SECRET, "db", "k")),)),)
    )


def test_the_plugin_refuses_overrides_for_a_template_without_containers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(plugin.PluginError, match="containers is empty"):
        plugin.requested_overrides(run_args(monkeypatch, "--env", "A=1"), {})


@pytest.mark.parametrize(
    ("argv", "names"),
    [
        (("run", "cj", "--env", "NOVALUE"), "'NOVALUE' is not NAME=VALUE"),
        (("run", "cj", "--image", "=x"), "'=x' is not [CONTAINER=]IMAGE"),
        (("run", "cj", "--env-from-secret", "T=db"), "'T=db' is not NAME=SECRET/KEY"),
        (("run", "cj", "--env-from-secret", "db/k"), "'db/k' is not NAME=SECRET/KEY"),
        (("run", "cj", "--env-from-configmap", "T=/k"), "'T=/k' is not NAME=CONFIGMAP/KEY"),
        (("history", "cj", "--", "a"), "arguments after -- are for run, not history"),
    ],
)
def test_bad_plugin_flags_exit_2_naming_the_flag(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], names: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        plugin.main(list(argv))
    assert exited.value.code == 2
    assert names in capsys.readouterr().err


def test_history_shows_a_jobs_overrides() -> None:
    annotations = {OVERRIDES_ANNOTATION: overrides_json(FULL)}
    assert plugin._overrides_shown(annotations) == overrides_summary(FULL)
    assert plugin._overrides_shown({}) == "-"
    assert plugin._overrides_shown({OVERRIDES_ANNOTATION: "{not json"}) == "-"
