"""The webhooks on the real local control plane: the API server calls them over TLS.

A module fixture runs the webhook server in-process on 127.0.0.1 with a CA and serving
certificate from ``hack/gen-webhook-certs.sh``, registers the webhook configurations with
``clientConfig.url`` and the CA bundle, and switches the CronJob CRD to the conversion
webhook at that URL (the JSON patch that kustomize applies in ``config/default``, with the
URL in place of the Service). Every route records its calls, so a test can tell that the
webhook answered rather than the CRD schema: the API server runs schema defaulting before
the mutating webhooks, and the schema and CEL checks before the validating ones, so only
what a schema cannot say (``60 * * * *``, ``* * * * 7``) reaches the validating webhook
through it; the other bad inputs are also sent to the webhook directly.

The control plane is shared by the whole session: teardown (even after a failure)
deletes the test's CronJobs, patches the CRD back to the plain ``config/crd/bases`` one
(v2 not served, no conversion), waits until discovery no longer offers v2, deletes the
configurations and stops the server. The CRD is only ever patched, so its last-applied
annotation stays what ``install_crds`` wrote. kubectl runs with its own discovery cache
here, so the session's cache never learns of v2.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import dataclasses
import http.client
import json
import secrets
import shutil
import socket
import ssl
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.cli import WEBHOOK_CERT_ADVICE
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.serving import CertWatcher
from cronjob_operator.runtime.webhook import LIMITS, Route, WebhookServer
from cronjob_operator.webhooks import configdeployment, conversion, cronjob, manifests, nesting
from tests.integration.support import REPO, conversion_patches, install_crds, refused_by_rule

pytestmark = pytest.mark.cluster

GEN_CERTS = REPO / "hack" / "gen-webhook-certs.sh"
GROUP = batch_v1.CRONJOB.group
V1 = f"cronjobs.v1.{GROUP}"
V2 = f"cronjobs.v2.{GROUP}"
CONFIGURATION_NAMES = {
    "MutatingWebhookConfiguration": "cronjob-operator-test-mutating",
    "ValidatingWebhookConfiguration": "cronjob-operator-test-validating",
}
TIMEOUT = 60.0
IDLE_TIMEOUT = 2.0
"""Seconds the test server keeps a silent or idle connection open: short, so that the
broken-client tests do not hold a thread for long."""


def generate_certs(cert_dir: Path) -> None:
    """A CA (once) and a new serving certificate from it, as a local run would."""
    subprocess.run(
        ["bash", str(GEN_CERTS), str(cert_dir)], check=True, capture_output=True, timeout=60
    )


@dataclass
class Env:
    """The cluster with our webhooks registered, and the server answering them."""

    cp: ControlPlane
    namespace: str
    server: WebhookServer
    cert_dir: Path
    cache_dir: Path
    calls: list[tuple[str, str]] = field(default_factory=list)
    """(path, object name) of every review the server answered."""

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.cp.kubectl(f"--cache-dir={self.cache_dir}", *args, input=input)

    def apply(self, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return self.kubectl("apply", "-f", "-", input=json.dumps(obj))

    def get(self, resource: str, name: str) -> dict[str, Any]:
        result = self.kubectl("get", resource, name, "-n", self.namespace, "-o", "json")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)  # type: ignore[no-any-return]

    def post(
        self, path: str, body: bytes, content_type: str = "application/json"
    ) -> tuple[int, Any]:
        """POST to the server directly, verifying its certificate with the CA."""
        context = ssl.create_default_context(cafile=str(self.cert_dir / "ca.crt"))
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.server.port, context=context, timeout=10
        )
        try:
            connection.request("POST", path, body=body, headers={"Content-Type": content_type})
            response = connection.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        finally:
            connection.close()

    def review(self, path: str, obj: dict[str, Any], kind: str = "CronJob") -> dict[str, Any]:
        """Send one CREATE AdmissionReview of ``obj`` directly; the response part."""
        group = GROUP if kind == "CronJob" else obj["apiVersion"].partition("/")[0]
        request = {
            "uid": secrets.token_hex(8),
            "kind": {"group": group, "version": "v1", "kind": kind},
            "operation": "CREATE",
            "name": obj["metadata"]["name"],
            "namespace": self.namespace,
            "object": obj,
        }
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}
        status, answer = self.post(path, json.dumps({**review, "request": request}).encode())
        assert status == 200, answer
        assert answer["response"]["uid"] == request["uid"]
        return answer["response"]  # type: ignore[no-any-return]

    def validated(self, name: str, path: str = cronjob.VALIDATE_PATH) -> bool:
        """Whether the API server sent ``name`` to the validating webhook at ``path``."""
        return (path, name) in self.calls

    def served_versions(self) -> list[str]:
        group = self.kubectl("get", "--raw", f"/apis/{GROUP}")
        assert group.returncode == 0, group.stderr
        return [v["version"] for v in json.loads(group.stdout)["versions"]]


def recording(path: str, route: Route, calls: list[tuple[str, str]]) -> Route:
    def record(body: Any) -> Any:
        with contextlib.suppress(AttributeError, TypeError):
            request = body.get("request") or {}
            calls.append((path, request.get("name") or ""))
        return route(body)

    return record


def a_cronjob(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "schedule": "*/5 * * * *",
        "jobTemplate": {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [{"name": "c", "image": "busybox"}],
                        "restartPolicy": "Never",
                    }
                }
            }
        },
    }
    body.update(spec)
    return {
        "apiVersion": batch_v1.CRONJOB.api_version,
        "kind": "CronJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {key: value for key, value in body.items() if value is not None},
    }


def _apply_configurations(env: Env, ca_pem: bytes) -> manifests.ClientConfig:
    """Register (or re-register) the webhook configurations, trusting only ``ca_pem``."""
    url = f"https://127.0.0.1:{env.server.port}"
    client_config = manifests.url_client_config(url, ca_pem)
    configurations = manifests.configurations(client_config)
    for obj in configurations:
        obj["metadata"]["name"] = CONFIGURATION_NAMES[obj["kind"]]
    result = env.kubectl("apply", "-f", "-", input=manifests.render_yaml(configurations))
    assert result.returncode == 0, result.stderr
    return client_config


def _register(env: Env) -> None:
    client_config = _apply_configurations(env, (env.cert_dir / "ca.crt").read_bytes())
    forward, _ = conversion_patches(client_config(conversion.PATH))
    result = env.kubectl("patch", "crd", f"cronjobs.{GROUP}", "--type=json", "-p", forward)
    assert result.returncode == 0, result.stderr
    probe = json.dumps(a_cronjob("probe", env.namespace, schedule="60 * * * *"))

    def webhooks_answer() -> bool:
        rejected = env.kubectl("create", "--dry-run=server", "-f", "-", input=probe)
        return env.validated("probe") and "minute 60 is out of range" in rejected.stderr

    wait_for(webhooks_answer, TIMEOUT, message="the API server calling the webhooks")
    wait_for(
        lambda: env.kubectl("get", V2, "-n", env.namespace).returncode == 0,
        TIMEOUT,
        message="CronJob v2 served",
    )


def _restore_crd(env: Env) -> None:
    """Back to the plain base CRD (v2 not served, no conversion), and discovery with it."""
    _, back = conversion_patches({"url": "https://unused"})
    result = env.kubectl("patch", "crd", f"cronjobs.{GROUP}", "--type=json", "-p", back)
    assert result.returncode == 0, result.stderr
    live = env.cp.kubectl_json("get", "crd", f"cronjobs.{GROUP}")
    assert live["spec"]["conversion"] == {"strategy": "None"}
    assert [v["served"] for v in live["spec"]["versions"]] == [True, False]
    wait_for(lambda: env.served_versions() == ["v1"], TIMEOUT, message="v2 no longer served")


@pytest.fixture(scope="module")
def env(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    install_crds(control_plane)
    cert_dir = tmp_path_factory.mktemp("webhook-certs")
    generate_certs(cert_dir)
    namespace = f"test-webhooks-{secrets.token_hex(4)}"
    control_plane.kubectl("create", "namespace", namespace, check=True)
    calls: list[tuple[str, str]] = []
    routes = {path: recording(path, r, calls) for path, r in manifests.routes().items()}
    limits = dataclasses.replace(LIMITS, idle_timeout=IDLE_TIMEOUT)
    server = WebhookServer(("127.0.0.1", 0), cert_dir, routes, limits=limits)
    server.start()
    env = Env(control_plane, namespace, server, cert_dir, tmp_path_factory.mktemp("kubectl"), calls)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(control_plane.kubectl, "delete", "namespace", namespace, "--wait=false")
        cleanup.callback(server.stop)
        for kind, name in CONFIGURATION_NAMES.items():
            cleanup.callback(env.kubectl, "delete", kind, name, "--ignore-not-found")
        cleanup.callback(_restore_crd, env)
        cleanup.callback(
            env.kubectl, "delete", V1, "--all", "-n", namespace, "--wait=true", "--timeout=60s"
        )
        _register(env)
        yield env


# --- defaulting ---------------------------------------------------------------------------


def test_defaults_appear_on_create_and_set_values_are_kept(env: Env) -> None:
    env.calls.clear()
    result = env.apply(a_cronjob("defaults", env.namespace))
    assert result.returncode == 0, result.stderr
    spec = env.get(V1, "defaults")["spec"]
    assert {key: spec[key] for key in cronjob.DEFAULTS} == cronjob.DEFAULTS
    assert env.validated("defaults", cronjob.MUTATE_PATH), "the API server called it"
    assert env.validated("defaults")

    kept = {
        "concurrencyPolicy": "Forbid",
        "suspend": True,
        "successfulJobsHistoryLimit": 0,
        "failedJobsHistoryLimit": 0,
    }
    result = env.apply(a_cronjob("kept", env.namespace, **kept))
    assert result.returncode == 0, result.stderr
    spec = env.get(V1, "kept")["spec"]
    assert {key: spec[key] for key in kept} == kept


def test_the_mutating_webhook_patches_what_the_schema_did_not_default(env: Env) -> None:
    # The API server applies the schema's defaults before calling mutating webhooks, so
    # through it the patch is empty; an object without them gets all four.
    response = env.review(cronjob.MUTATE_PATH, a_cronjob("bare", env.namespace))
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    patch = json.loads(base64.b64decode(response["patch"]))
    assert {op["path"]: op["value"] for op in patch} == {
        f"/spec/{key}": value for key, value in cronjob.DEFAULTS.items()
    }


# --- validation ---------------------------------------------------------------------------

# (id, changes to a valid CronJob, the field the message must name, reaches the webhook
# through the API server: only what the CRD schema cannot reject itself)
BAD_INPUTS = [
    ("empty-schedule", {"schedule": ""}, "spec.schedule", False),
    ("dow-7", {"schedule": "* * * * 7"}, "spec.schedule", True),
    ("minute-60", {"schedule": "60 * * * *"}, "spec.schedule", True),
    ("reboot", {"schedule": "@reboot"}, "spec.schedule", False),
    ("six-fields", {"schedule": "0 * * * * *"}, "spec.schedule", True),
    ("tz-prefix", {"schedule": "TZ=UTC * * * * *"}, "spec.schedule", False),
    ("mars", {"timeZone": "Mars/Olympus"}, "spec.timeZone", False),
    ("local", {"timeZone": "Local"}, "spec.timeZone", False),
    ("long-name", {"name": "n" * 53}, "metadata.name", False),
    (
        "negative-successful",
        {"successfulJobsHistoryLimit": -1},
        "successfulJobsHistoryLimit",
        False,
    ),
    ("negative-failed", {"failedJobsHistoryLimit": -1}, "failedJobsHistoryLimit", False),
    ("unknown-policy", {"concurrencyPolicy": "Sometimes"}, "concurrencyPolicy", False),
]


@pytest.mark.parametrize(
    ("changes", "field_path", "via_webhook"),
    [pytest.param(c, f, w, id=i) for i, c, f, w in BAD_INPUTS],
)
def test_each_bad_input_is_rejected_with_its_field(
    env: Env, changes: dict[str, Any], field_path: str, via_webhook: bool
) -> None:
    changes = dict(changes)
    name = changes.pop("name", f"bad-{secrets.token_hex(3)}")
    obj = a_cronjob(name, env.namespace, **changes)
    result = env.apply(obj)
    assert result.returncode != 0, f"accepted: {obj['spec']}"
    assert field_path in result.stderr, result.stderr
    assert env.validated(name) is via_webhook, "only what the schema cannot say reaches it"
    assert env.kubectl("get", V1, name, "-n", env.namespace).returncode != 0
    # The webhook rejects it too, naming the same field.
    response = env.review(cronjob.VALIDATE_PATH, obj)
    assert response["allowed"] is False
    assert response["status"]["code"] == 422
    causes = response["status"]["details"]["causes"]
    assert any(cause["field"].endswith(field_path) for cause in causes), causes


def test_a_backfill_before_1970_is_refused_by_the_webhook_on_create_and_update(env: Env) -> None:
    """A Job name carries its scheduled time in Unix seconds: a range before 1970 would
    name Jobs that never read back (issue 35), so the webhook refuses it, naming the
    annotation; so it does a history limit above the cap (no schema can say either)."""
    field = f"metadata.annotations[{batch_v1.BACKFILL_ANNOTATION}]"

    def with_backfill(start: str, end: str) -> dict[str, Any]:
        obj = a_cronjob("epoch", env.namespace, schedule="0 * * * *")
        request = {"token": f"t-{start}", "from": start, "to": end}
        obj["metadata"]["annotations"] = {batch_v1.BACKFILL_ANNOTATION: json.dumps(request)}
        return obj

    refused = env.apply(with_backfill("1969-12-31T00:00:00Z", "1970-01-02T00:00:00Z"))
    assert refused.returncode != 0
    assert field in refused.stderr, refused.stderr
    assert "1970-01-01T00:00:00Z" in refused.stderr
    assert env.validated("epoch")
    assert env.kubectl("get", V1, "epoch", "-n", env.namespace).returncode != 0
    assert env.apply(with_backfill("2020-01-01T00:00:00Z", "2020-01-01T02:00:00Z")).returncode == 0
    update = env.apply(with_backfill("1960-01-01T00:00:00Z", "1960-01-01T02:00:00Z"))
    assert update.returncode != 0
    assert field in update.stderr, update.stderr
    too_many = env.apply(a_cronjob("epoch", env.namespace, successfulJobsHistoryLimit=1001))
    assert too_many.returncode != 0
    assert "spec.successfulJobsHistoryLimit: Invalid value: 1001" in too_many.stderr


def test_a_run_request_with_bad_overrides_is_refused_by_the_webhook(env: Env) -> None:
    """A run request's overrides (issue 40) are checked when the annotation is set: the
    shape, and that the containers named are the template's; a variable may name a
    Secret's key, not a Pod field (issue 47)."""
    field = f"metadata.annotations[{batch_v1.RUN_ANNOTATION}]"
    assert env.apply(a_cronjob("ovr", env.namespace)).returncode == 0

    def annotate(request: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        value = f"{batch_v1.RUN_ANNOTATION}={json.dumps(request)}"
        return env.kubectl("annotate", V1, "ovr", "-n", env.namespace, value, "--overwrite")

    missing = annotate({"token": "t1", "overrides": {"containers": [{"name": "x", "image": "y"}]}})
    assert missing.returncode != 0
    assert field in missing.stderr, missing.stderr
    assert "no container 'x' (it has c)" in missing.stderr
    numeric = annotate({"token": "t1", "overrides": {"env": [{"name": "N", "value": 3}]}})
    assert numeric.returncode != 0
    assert "overrides.env[0].value must be a string" in numeric.stderr
    field_ref = {"name": "P", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
    refused = annotate({"token": "t1", "overrides": {"env": [field_ref]}})
    assert refused.returncode != 0
    assert "overrides.env[0].valueFrom.fieldRef: not offered" in refused.stderr, refused.stderr
    good = {"token": "t1", "overrides": {"containers": [{"name": "c", "args": ["--full"]}]}}
    assert annotate(good).returncode == 0
    secret = {"name": "T", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
    assert annotate({"token": "t2", "overrides": {"env": [secret]}}).returncode == 0


def test_all_errors_come_back_together_on_create_and_update(env: Env) -> None:
    result = env.apply(a_cronjob("together", env.namespace, schedule="60 * * * 7"))
    assert env.validated("together")
    assert "minute 60 is out of range 0-59" in result.stderr
    assert "day of week 7 is out of range 0-6" in result.stderr
    assert env.apply(a_cronjob("together", env.namespace)).returncode == 0
    update = env.apply(a_cronjob("together", env.namespace, schedule="* 24 * * *"))
    assert update.returncode != 0
    assert 'spec.schedule: Invalid value: "* 24 * * *": hour 24 is out of range 0-23' in (
        update.stderr
    )


def test_config_deployment_rules_are_checked(env: Env) -> None:
    obj: dict[str, Any] = {
        "apiVersion": "apps.tutorial.kubebuilder.io/v1",
        "kind": "ConfigDeployment",
        "metadata": {"name": "settings", "namespace": env.namespace},
        "spec": {
            "configMap": "Not_A_Name",
            "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }
    result = env.apply(obj)
    assert result.returncode != 0
    assert env.validated("settings", configdeployment.VALIDATE_PATH)
    assert 'spec.configMap: Invalid value: "Not_A_Name": a lowercase RFC 1123' in result.stderr
    obj["spec"]["configMap"] = "settings"
    result = env.apply(obj)
    assert result.returncode == 0, result.stderr
    response = env.review(configdeployment.VALIDATE_PATH, obj, kind="ConfigDeployment")
    assert response["allowed"] is True
    env.kubectl("delete", "configdeployment", "settings", "-n", env.namespace)


def test_an_object_nested_600_deep_is_refused_naming_the_field(env: Env) -> None:
    """Issue 35: the API server stores 10,000 levels of ``affinity``; the webhook refuses
    nesting deeper than ``nesting.MAX_DEPTH`` with the field's path."""
    refused_too_deep(env, "deep", with_affinity("deep", env.namespace, 601))
    assert env.kubectl("get", V1, "deep", "-n", env.namespace).returncode != 0


def with_affinity(name: str, namespace: str, levels: int) -> dict[str, Any]:
    """A CronJob whose pod template's ``affinity`` nests ``levels`` objects deep."""
    affinity: dict[str, Any] = {}
    for _ in range(levels - 1):
        affinity = {"a": affinity}
    obj = a_cronjob(name, namespace)
    obj["spec"]["jobTemplate"]["spec"]["template"]["spec"]["affinity"] = affinity
    return obj


def refused_too_deep(env: Env, name: str, obj: dict[str, Any]) -> None:
    """Apply ``obj`` and check that the webhook refused it naming its affinity."""
    result = env.apply(obj)
    assert result.returncode != 0, "admitted"
    assert env.validated(name)
    assert (
        "spec.jobTemplate.spec.template.spec.affinity.a.a.a.a.a.a...: Invalid value: "
        f'"<nested more than {nesting.MAX_DEPTH} levels>"'
    ) in result.stderr
    assert "managedFields" not in result.stderr


@pytest.mark.parametrize("group", [".", ".."])
def test_the_schema_refuses_a_group_name_that_is_a_dot_segment(env: Env, group: str) -> None:
    """Issue 47: spec.concurrencyGroup.name had only a length limit in the schema, so
    where no webhook runs (config/local, config/namespaced) "." and ".." were stored."""
    name = "dots" if group == ".." else "dot"
    result = env.apply(a_cronjob(name, env.namespace, concurrencyGroup={"name": group}))
    assert result.returncode != 0, "admitted"
    assert "spec.concurrencyGroup.name: Invalid value" in result.stderr, result.stderr
    assert not env.validated(name), "refused by the webhook, not by the schema"


def users_depth(obj: dict[str, Any]) -> int:
    """How many levels ``obj``'s own fields nest (the root is one; managedFields left out)."""
    depth = 1
    while nesting.path_beyond(nesting.users_fields(obj), depth) is not None:
        depth += 1
    return depth


def test_the_deepest_cronjob_admitted_nests_exactly_the_documented_depth(env: Env) -> None:
    """Issue 47: the bound counted the managedFields the API server adds (the spec mirrored
    five levels deeper), so the deepest CronJob a user could create nested 59 levels, not
    the 64 docs/security.md states, and the refusal named metadata.managedFields."""
    stated = (
        "| nesting the webhooks admit (CronJob, ConfigDeployment) | "
        f"{nesting.MAX_DEPTH} levels from the object's root"
    )
    assert stated in (REPO / "docs" / "security.md").read_text()
    levels = nesting.MAX_DEPTH - 6  # the root, spec, jobTemplate, spec, template, spec
    result = env.apply(with_affinity("deepest", env.namespace, levels))
    assert result.returncode == 0, result.stderr
    shown = env.kubectl(
        "get", V1, "deepest", "-n", env.namespace, "-o", "json", "--show-managed-fields"
    )
    assert shown.returncode == 0, shown.stderr
    stored = json.loads(shown.stdout)
    assert stored["metadata"]["managedFields"], "the API server sent no managedFields"
    assert users_depth(stored) == nesting.MAX_DEPTH
    refused_too_deep(env, "too-deep", with_affinity("too-deep", env.namespace, levels + 1))
    env.kubectl("delete", V1, "deepest", "-n", env.namespace)


def test_config_deployment_sources_are_checked_by_the_schema_and_the_webhook(env: Env) -> None:
    def config_deployment(name: str, **spec: Any) -> dict[str, Any]:
        return {
            "apiVersion": "apps.tutorial.kubebuilder.io/v1",
            "kind": "ConfigDeployment",
            "metadata": {"name": name, "namespace": env.namespace},
            "spec": {
                "template": {"spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                **spec,
            },
        }

    schema_rejects: dict[str, tuple[dict[str, Any], Callable[[str], bool]]] = {
        "no-source": (
            {},
            lambda stderr: refused_by_rule(
                stderr,
                "spec",
                "name a ConfigMap (spec.configMap) or at least one Secret (spec.secrets)",
            ),
        ),
        "keys-alone": (
            {"configMapKeys": ["a"], "secrets": [{"name": "db"}]},
            lambda stderr: refused_by_rule(stderr, "spec.configMapKeys", "needs spec.configMap"),
        ),
        "duplicate-key": (
            {"secrets": [{"name": "db", "keys": ["a", "a"]}]},
            lambda stderr: 'spec.secrets[0].keys[1]: Duplicate value: "a"' in stderr,
        ),
        "bad-key": (
            {"configMap": "s", "configMapKeys": ["a b"]},
            lambda stderr: "spec.configMapKeys[0]" in stderr,
        ),
    }
    for name, (spec, shows_refusal) in schema_rejects.items():
        result = env.apply(config_deployment(name, **spec))
        assert result.returncode != 0, f"accepted: {spec}"
        assert shows_refusal(result.stderr), result.stderr
        assert not env.validated(name, configdeployment.VALIDATE_PATH)
    result = env.apply(config_deployment("bad-secret", secrets=[{"name": "Not_A_Name"}]))
    assert result.returncode != 0
    assert env.validated("bad-secret", configdeployment.VALIDATE_PATH)
    assert 'spec.secrets[0].name: Invalid value: "Not_A_Name": a lowercase RFC 1123' in (
        result.stderr
    )
    accepted = config_deployment("secret-only", secrets=[{"name": "db", "keys": ["password"]}])
    result = env.apply(accepted)
    assert result.returncode == 0, result.stderr
    env.kubectl("delete", "configdeployment", "secret-only", "-n", env.namespace)


# --- conversion ---------------------------------------------------------------------------


def test_a_v2_object_reads_back_as_v1_and_as_v2_identically(env: Env) -> None:
    env.calls.clear()
    fields = {"minute": "*/5", "hour": "9-17", "dayOfWeek": "1-5"}
    v2 = a_cronjob("structured", env.namespace, schedule=fields, timeZone="Europe/Berlin")
    v2["apiVersion"] = batch_v2.CRONJOB.api_version
    result = env.apply(v2)
    assert result.returncode == 0, result.stderr
    assert (conversion.PATH, "") in env.calls
    assert env.validated("structured", cronjob.MUTATE_PATH), "v2 goes through the v1 webhooks"

    as_v2, as_v1 = env.get(V2, "structured"), env.get(V1, "structured")
    assert as_v2["spec"]["schedule"] == fields
    assert as_v1["spec"]["schedule"] == "*/5 9-17 * * 1-5"
    assert as_v2["spec"]["timeZone"] == as_v1["spec"]["timeZone"] == "Europe/Berlin"
    assert conversion.to_v2(as_v1) == as_v2
    assert conversion.to_v1(as_v2) == as_v1

    bad = copy.deepcopy(v2)
    bad["metadata"]["name"] = "structured-bad"
    bad["spec"]["schedule"] = {"minute": "60"}
    result = env.apply(bad)
    assert env.validated("structured-bad")
    assert 'spec.schedule: Invalid value: "60 * * * *"' in result.stderr


def test_a_v1_macro_and_status_conditions_survive_a_v2_round_trip(env: Env) -> None:
    result = env.apply(a_cronjob("hourly", env.namespace, schedule="@hourly"))
    assert result.returncode == 0, result.stderr
    status = {
        "lastScheduleTime": "2026-01-02T04:00:00Z",
        "observedGeneration": 1,
        "conditions": [
            {
                "type": "Available",
                "status": "True",
                "reason": "Scheduling",
                "message": "next run at 05:00",
                "lastTransitionTime": "2026-01-02T03:04:06Z",
                "observedGeneration": 1,
            }
        ],
    }
    patched = env.kubectl(
        "patch", V1, "hourly", "-n", env.namespace, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    assert patched.returncode == 0, patched.stderr

    as_v2 = env.get(V2, "hourly")
    assert as_v2["spec"]["schedule"] == {"minute": "0"}
    assert as_v2["metadata"]["annotations"][batch_v2.V1_SCHEDULE_ANNOTATION] == "@hourly"
    assert as_v2["status"] == status

    # A v2 client writes the object back (changing a label): v1 still says @hourly.
    as_v2["metadata"].setdefault("labels", {})["edited-as"] = "v2"
    result = env.kubectl("replace", "-f", "-", input=json.dumps(as_v2))
    assert result.returncode == 0, result.stderr
    as_v1 = env.get(V1, "hourly")
    assert as_v1["spec"]["schedule"] == "@hourly"
    assert batch_v2.V1_SCHEDULE_ANNOTATION not in as_v1["metadata"].get("annotations", {})
    assert as_v1["metadata"]["labels"]["edited-as"] == "v2"
    assert as_v1["status"] == status


def test_schedules_and_the_other_issue_23_fields_survive_a_v2_round_trip(env: Env) -> None:
    obj = a_cronjob("several", env.namespace, catchUpPolicy="All", concurrencyPolicy="BufferOne")
    del obj["spec"]["schedule"]
    obj["spec"]["schedules"] = ["@daily", "0 12 * * 6"]
    result = env.apply(obj)
    assert result.returncode == 0, result.stderr
    assert env.validated("several"), "the webhook checked each entry"
    as_v2 = env.get(V2, "several")
    assert as_v2["spec"]["schedules"] == [
        {"minute": "0", "hour": "0"},
        {"minute": "0", "hour": "12", "dayOfWeek": "6"},
    ]
    assert as_v2["spec"]["catchUpPolicy"] == "All"
    assert json.loads(as_v2["metadata"]["annotations"][batch_v2.V1_SCHEDULES_ANNOTATION]) == [
        "@daily",
        "0 12 * * 6",
    ]
    as_v2["metadata"].setdefault("labels", {})["edited-as"] = "v2"
    result = env.kubectl("replace", "-f", "-", input=json.dumps(as_v2))
    assert result.returncode == 0, result.stderr
    as_v1 = env.get(V1, "several")
    assert as_v1["spec"]["schedules"] == ["@daily", "0 12 * * 6"]
    assert as_v1["spec"]["concurrencyPolicy"] == "BufferOne"
    bad = a_cronjob("several-bad", env.namespace)
    bad["spec"]["schedules"] = ["0 * * * *"]
    refused = env.apply(bad)
    assert refused.returncode != 0
    assert "set exactly one of spec.schedule and spec.schedules" in refused.stderr


# --- the server -------------------------------------------------------------------------


MALFORMED = [
    pytest.param(b"{not json", "application/json", 400, id="not-json"),
    pytest.param(b"\xff\xfe", "application/json", 400, id="not-utf8"),
    pytest.param(b"[]", "application/json", 400, id="a-list"),
    pytest.param(b"[" * 100_000, "application/json", 400, id="deeply-nested"),
    pytest.param(b"{}", "application/json", 400, id="empty-object"),
    pytest.param(
        json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}).encode(),
        "application/json",
        400,
        id="no-request",
    ),
    pytest.param(
        json.dumps(
            {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {"kind": {}, "operation": "CREATE", "object": {}},
            }
        ).encode(),
        "application/json",
        400,
        id="no-uid",
    ),
    pytest.param(b"{}", "text/plain", 415, id="wrong-content-type"),
]


@pytest.mark.parametrize(("body", "content_type", "code"), MALFORMED)
@pytest.mark.parametrize(
    "path", [cronjob.MUTATE_PATH, cronjob.VALIDATE_PATH, configdeployment.VALIDATE_PATH, "/convert"]
)
def test_malformed_bodies_get_an_error_status_not_a_crash(
    env: Env, path: str, body: bytes, content_type: str, code: int
) -> None:
    status, answer = env.post(path, body, content_type)
    assert status == code
    assert answer["kind"] == "Status"
    assert answer["code"] == code
    assert answer["message"]


def test_the_server_survives_broken_clients(env: Env) -> None:
    with socket.create_connection(("127.0.0.1", env.server.port)) as plain:
        plain.sendall(b"POST /convert HTTP/1.1\r\n\r\n")  # no TLS at all
        plain.settimeout(5)
        with contextlib.suppress(OSError):
            plain.recv(100)
    context = ssl.create_default_context(cafile=str(env.cert_dir / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", env.server.port))
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GARBAGE\r\n\r\n")  # not HTTP: http.server answers and hangs up
        assert tls.recv(100)
    for request in (
        b"POST /convert HTTP/1.1\r\nContent-Type: application/json\r\nContent-Length: nope\r\n\r\n",
        b"POST /convert HTTP/1.1\r\nContent-Type: application/json\r\n\r\n",
        b"GARBAGE /convert HTTP/1.1\r\n\r\n",
    ):
        raw = socket.create_connection(("127.0.0.1", env.server.port))
        with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
            tls.sendall(request)
            assert tls.recv(100).split(b" ")[1] in (b"400", b"411", b"501"), request
    status, _ = env.post("/nowhere", b"{}")
    assert status == 404
    assert env.server.ready() is None
    result = env.apply(a_cronjob("after-garbage", env.namespace, schedule="60 * * * *"))
    assert "minute 60" in result.stderr
    assert env.validated("after-garbage"), "the API server is still answered"


def test_with_128_connections_stalled_in_their_bodies_the_api_server_is_answered(
    env: Env,
) -> None:
    """Issue 35: 128 connections that sent a review's headers and stalled held every slot;
    the API server's calls were dropped and, with failurePolicy Fail, every CronJob write
    refused. A stalled body is now evicted for a new connection."""
    context = ssl.create_default_context(cafile=str(env.cert_dir / "ca.crt"))
    stalled = []
    try:
        for n in range(LIMITS.max_connections):
            source = f"127.0.0.{2 + n % 4}"  # four attackers: no per-address cap helps
            raw = socket.create_connection(
                ("127.0.0.1", env.server.port), timeout=10, source_address=(source, 0)
            )
            tls = context.wrap_socket(raw, server_hostname="127.0.0.1")
            tls.sendall(b"POST /convert HTTP/1.1\r\nContent-Type: application/json\r\n")
            tls.sendall(b"Content-Length: 1000\r\n\r\n{")  # slots, not the budget
            stalled.append(tls)
        wait_for(
            lambda: env.server.connections() == (LIMITS.max_connections,) * 2,
            TIMEOUT,
            message="every slot held by a stalled body",
        )
        result = env.apply(a_cronjob("past-stalled", env.namespace, schedule="60 * * * *"))
        assert "minute 60" in result.stderr
        assert env.validated("past-stalled"), "the API server's review was answered"
        assert env.server.ready() is None
    finally:
        for tls in stalled:
            tls.close()


def test_alpn_picks_http_1_1_even_when_h2_is_offered(env: Env) -> None:
    context = ssl.create_default_context(cafile=str(env.cert_dir / "ca.crt"))
    context.set_alpn_protocols(["h2", "http/1.1"])
    raw = socket.create_connection(("127.0.0.1", env.server.port), timeout=5)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        assert tls.selected_alpn_protocol() == "http/1.1"
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def _served_certificate(env: Env) -> bytes:
    """The certificate a new connection gets, verified against ``ca.crt`` in the cert dir."""
    context = ssl.create_default_context(cafile=str(env.cert_dir / "ca.crt"))
    raw = socket.create_connection(("127.0.0.1", env.server.port), timeout=5)
    with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        cert = tls.getpeercert(binary_form=True)
    assert cert is not None
    return cert


def _file_certificate(env: Env) -> bytes:
    return ssl.PEM_cert_to_DER_cert((env.cert_dir / "tls.crt").read_text())


def _dry_run_create(env: Env, obj: dict[str, Any]) -> str:
    """The API server's answer (stderr) to a server-side dry-run create of ``obj``."""
    return env.kubectl("create", "--dry-run=server", "-f", "-", input=json.dumps(obj)).stderr


def test_a_rotated_certificate_is_served_without_a_restart(env: Env, tmp_path: Path) -> None:
    # The rotation is to a certificate of a NEW CA, and the API server is told to trust
    # only that CA: so once it gets through to the webhook again, the server must be
    # serving the rotated certificate (an old-CA certificate would fail the handshake).
    before = _served_certificate(env)
    assert before == _file_certificate(env)
    generate_certs(tmp_path)  # a new CA, and a serving certificate from it
    new_ca = (tmp_path / "ca.crt").read_bytes()
    assert new_ca != (env.cert_dir / "ca.crt").read_bytes()
    client_config = _apply_configurations(env, new_ca)
    bad = a_cronjob("after-rotation", env.namespace, schedule="* * * * 7")
    wait_for(
        lambda: "x509" in _dry_run_create(env, bad),
        TIMEOUT,
        message="the API server no longer trusting the certificate still served",
    )

    for name in ("ca.key", "ca.crt", "tls.key", "tls.crt"):  # the server's files, in place
        shutil.copyfile(tmp_path / name, env.cert_dir / name)
    rotated = _file_certificate(env)
    assert rotated != before
    served = wait_for(
        lambda: _served_certificate(env) == rotated,
        10,
        message="the new certificate served on a new connection",
        ignore=(ssl.SSLError,),  # the old certificate does not verify against the new CA
    )
    assert served
    assert env.server.ready() is None

    def rejected_by_the_webhook() -> str | None:
        answer = _dry_run_create(env, bad)
        return answer if "day of week 7" in answer else None

    answer = wait_for(
        rejected_by_the_webhook, TIMEOUT, message="the webhook answering the API server again"
    )
    assert "x509" not in answer
    assert env.validated("after-rotation"), "the API server completed a handshake with it"
    # Conversion too trusts the new CA from here on (later tests convert v2 objects).
    ca_bundle = client_config(conversion.PATH)["caBundle"]
    patch = [
        {
            "op": "replace",
            "path": "/spec/conversion/webhook/clientConfig/caBundle",
            "value": ca_bundle,
        }
    ]
    result = env.kubectl(
        "patch", "crd", f"cronjobs.{GROUP}", "--type=json", "-p", json.dumps(patch)
    )
    assert result.returncode == 0, result.stderr


def test_a_server_without_a_certificate_is_not_ready_until_one_appears(tmp_path: Path) -> None:
    server = WebhookServer(
        ("127.0.0.1", 0), tmp_path, manifests.routes(), cert_advice=WEBHOOK_CERT_ADVICE
    )
    server.start()
    try:
        problem = server.ready()
        assert problem is not None
        assert "tls.crt" in problem
        assert WEBHOOK_CERT_ADVICE in problem, "says what to do (the CLI's advice)"
        generate_certs(tmp_path)
        wait_for(lambda: server.ready() is None, 10, message="ready with a certificate")
    finally:
        server.stop()


def test_a_half_written_pair_keeps_the_last_good_certificate(tmp_path: Path) -> None:
    generate_certs(tmp_path)
    watcher = CertWatcher(tmp_path, advice=WEBHOOK_CERT_ADVICE)
    first = watcher.context()
    assert first is not None
    assert watcher.problem is None
    subprocess.run(
        ["openssl", "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256",
         "-out", str(tmp_path / "tls.key")],
        check=True, capture_output=True,
    )  # fmt: skip
    assert watcher.context() is first, "a key that does not match is not used"
    assert watcher.problem is not None
    assert "tls.key" in watcher.problem
    assert WEBHOOK_CERT_ADVICE not in watcher.problem, "a pair is serving: no advice"
    generate_certs(tmp_path)
    second = watcher.context()
    assert second is not None
    assert second is not first
    assert watcher.problem is None
    assert watcher.context() is second, "unchanged files are not loaded again"
