"""The Helm chart (dist/chart) against config/: generated, linted, rendered, compared.

The chart and config/ must not drift. hack/gen-chart.py generates the chart's objects
from ``kubectl kustomize`` output; the first test re-runs it into a copy and fails when
dist/chart differs (stale). The others render the chart with ``helm template`` and
compare it object by object with kustomize's render of the matching overlay: the
defaults are config/local, webhooks are config/default (the manager's own certificate),
webhooks with cert-manager are config/certmanager, manager.namespaced is
config/namespaced, the monitoring toggles are config/prometheus and config/grafana.
Helm's own labels and the CRDs' ``helm.sh/resource-policy: keep`` are the only differences
allowed. Non-default values are checked for
what they change. No control plane is needed: helm and kubectl only render.
"""

from __future__ import annotations

import difflib
import filecmp
import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Set as AbstractSet
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from cronjob_operator.envtest import find_bin_dir
from tests.integration.support import REPO
from tests.tools import tool

CHART = REPO / "dist" / "chart"
CONFIG = REPO / "config"
NAMESPACE = "cronjob-operator-system"
RELEASE = "cronjob-operator"
HELM_LABELS = {
    "helm.sh/chart",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/managed-by",
    "app.kubernetes.io/version",
}
KEEP = ("helm.sh/resource-policy", "keep")
Key = tuple[str, str]


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_chart", REPO / "hack" / "gen-chart.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["gen_chart"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kubectl() -> str:
    return str(find_bin_dir() / "kubectl")


@pytest.fixture(scope="module")
def helm_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("helm")
    return {
        "HOME": str(home),
        "HELM_CACHE_HOME": str(home / "cache"),
        "HELM_CONFIG_HOME": str(home / "config"),
        "HELM_DATA_HOME": str(home / "data"),
        "PATH": "/usr/bin:/bin",
    }


def helm(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [tool("helm"), *args], capture_output=True, text=True, env=env, check=False
    )


def template(env: dict[str, str], *values: str) -> list[dict[str, Any]]:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for value in values:
        args += ["--set", value]
    result = helm(env, *args)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def kustomize(kubectl: str, directory: Path) -> list[dict[str, Any]]:
    result = subprocess.run(
        [kubectl, "kustomize", str(directory)], capture_output=True, text=True, check=True
    )
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def by_key(
    objects: list[dict[str, Any]], *, without: AbstractSet[str] = frozenset()
) -> dict[Key, Any]:
    """Objects by (kind, name), Helm's labels and a CRD's keep annotation dropped, the
    kinds in ``without`` left out."""
    keyed = {}
    for obj in objects:
        if obj["kind"] in without:
            continue
        copy = json.loads(json.dumps(obj))
        labels = copy["metadata"].get("labels") or {}
        for label in HELM_LABELS:
            labels.pop(label, None)
        annotations = copy["metadata"].get("annotations") or {}
        kept = copy["kind"] == "CustomResourceDefinition" and annotations.pop(KEEP[0], None)
        if kept and not annotations:
            del copy["metadata"]["annotations"]
        keyed[copy["kind"], copy["metadata"]["name"]] = copy
    return keyed


def assert_same(chart: dict[Key, Any], config: dict[Key, Any], what: str) -> None:
    assert sorted(chart) == sorted(config), f"{what}: the chart and config/ render other objects"
    for key, obj in config.items():
        if chart[key] != obj:
            diff = difflib.unified_diff(
                yaml.safe_dump(obj).splitlines(),
                yaml.safe_dump(chart[key]).splitlines(),
                "config/",
                "chart",
                lineterm="",
            )
            fix = "templates/manager/manager.yaml" if key[0] == "Deployment" else "gen-chart.py"
            raise AssertionError(f"{what}: {key} differs ({fix}):\n" + "\n".join(diff))


@pytest.fixture(scope="module")
def config_with_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = tmp_path_factory.mktemp("config") / "config"
    shutil.copytree(CONFIG, copy)
    return load_generator().with_prometheus(copy)  # type: ignore[no-any-return]


def test_chart_is_what_gen_chart_makes_of_config(tmp_path: Path, kubectl: str) -> None:
    fresh = tmp_path / "chart"
    shutil.copytree(CHART, fresh)
    result = subprocess.run(
        [
            sys.executable,
            str(REPO / "hack" / "gen-chart.py"),
            "--chart",
            str(fresh),
            "--kubectl",
            kubectl,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr

    def differences(left: Path, right: Path) -> list[str]:
        compared = filecmp.dircmp(left, right)
        found = [str(left / name) for name in compared.left_only + compared.right_only]
        found += [str(left / name) for name in compared.diff_files]
        for name in compared.common_dirs:
            found += differences(left / name, right / name)
        return found

    assert differences(CHART, fresh) == [], "dist/chart is stale: run hack/gen-chart.py"


def test_helm_lint_passes_with_default_and_every_toggle(helm_env: dict[str, str]) -> None:
    for values in (
        [],
        ["webhook.enable=true"],
        ["webhook.enable=true,certManager.enable=true"],
        ["prometheus.enable=true,prometheusRule.enable=true,grafana.enable=true"],
        ["manager.sharding.enable=true,manager.replicas=3"],
        ["manager.namespaced=true,shardingPolicy.enable=false"],
        ["manager.namespaced=true,manager.sharding.enable=true,manager.replicas=3"],
        ["manager.namespaced=true,webhook.enable=true,certManager.enable=true"],
    ):
        args = ["lint", "--strict", str(CHART)]
        for value in values:
            args += ["--set", value]
        result = helm(helm_env, *args)
        assert result.returncode == 0, result.stdout + result.stderr


def test_defaults_render_config_local(helm_env: dict[str, str], kubectl: str) -> None:
    chart = by_key(template(helm_env))
    config = by_key(kustomize(kubectl, CONFIG / "local"), without={"Namespace"})
    assert_same(chart, config, "defaults vs config/local")


def test_sharding_values_render_config_sharded(helm_env: dict[str, str], kubectl: str) -> None:
    chart = by_key(
        template(helm_env, "manager.sharding.enable=true", "manager.replicas=3"),
        without={"CustomResourceDefinition"},
    )
    config = by_key(
        kustomize(kubectl, CONFIG / "sharded"), without={"Namespace", "CustomResourceDefinition"}
    )
    assert_same(chart, config, "manager.sharding vs config/sharded")


def test_namespaced_value_renders_config_namespaced(helm_env: dict[str, str], kubectl: str) -> None:
    chart = by_key(
        template(helm_env, "manager.namespaced=true"), without={"CustomResourceDefinition"}
    )
    config = by_key(
        kustomize(kubectl, CONFIG / "namespaced"),
        without={"Namespace", "CustomResourceDefinition"},
    )
    assert_same(chart, config, "manager.namespaced vs config/namespaced")
    assert ("Role", "cronjob-operator-manager-role") in chart
    assert ("ClusterRole", "cronjob-operator-manager-role") not in chart


def test_namespaced_sharding_values_render_config_namespaced_with_config_sharding(
    helm_env: dict[str, str], kubectl: str, tmp_path: Path
) -> None:
    """config/sharding is a component: a namespaced sharded install is config/namespaced
    with it, its verbs in the manager's Role."""
    config = tmp_path / "config"
    shutil.copytree(CONFIG, config)
    overlay = load_generator().namespaced_sharded(config)
    chart = by_key(
        template(helm_env, "manager.namespaced=true", "manager.sharding.enable=true",
                 "manager.replicas=3"),
        without={"CustomResourceDefinition", "Deployment"},
    )  # fmt: skip
    rendered = by_key(
        kustomize(kubectl, overlay),
        without={"Namespace", "CustomResourceDefinition", "Deployment"},
    )
    assert_same(chart, rendered, "manager.namespaced + manager.sharding vs config/sharding")
    role = chart["Role", "cronjob-operator-manager-role"]
    assert {"verbs": ["patch"], "apiGroups": ["batch"], "resources": ["jobs"]} in role["rules"]


def test_a_namespaced_manager_never_injects_its_own_ca(helm_env: dict[str, str]) -> None:
    """Injecting needs update on cluster-scoped objects (the webhook configurations, the
    CRD): the namespaced install with webhooks takes cert-manager's, or none."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    refused = helm(helm_env, *args, "--set", "manager.namespaced=true,webhook.enable=true")
    assert refused.returncode != 0
    assert "manager.namespaced with webhook.enable needs certManager.enable=true" in (
        refused.stderr
    )
    objects = template(
        helm_env, "manager.namespaced=true", "webhook.enable=true", "certManager.enable=true"
    )
    keyed = by_key(objects)
    bound = {
        obj["roleRef"]["name"]
        for obj in objects
        if obj["kind"] == "ClusterRoleBinding"
        and any(s["name"] == "cronjob-operator-controller-manager" for s in obj["subjects"])
    }
    rules = [rule for name in bound for rule in keyed["ClusterRole", name]["rules"]]
    assert rules == [
        {
            "apiGroups": ["authentication.k8s.io"],
            "resources": ["tokenreviews"],
            "verbs": ["create"],
        },
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
    ]
    assert "--webhook-cert-secret" not in str(
        keyed["Deployment", "cronjob-operator-controller-manager"]
    )


def test_sharding_policy_value_leaves_the_policy_out(helm_env: dict[str, str]) -> None:
    kinds = {obj["kind"] for obj in template(helm_env, "shardingPolicy.enable=false")}
    assert not kinds & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    assert {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} <= {
        obj["kind"] for obj in template(helm_env)
    }


def test_crd_value_leaves_the_crds_out_and_webhook_serves_v2(helm_env: dict[str, str]) -> None:
    assert not [
        o for o in template(helm_env, "crd.enable=false") if o["kind"].endswith("Definition")
    ]
    assert not (CHART / "crds").exists(), "crds/ cannot name the release's webhook Service"
    (cronjobs,) = [
        obj
        for obj in template(helm_env, "webhook.enable=true", "nameOverride=cj")
        if obj["metadata"]["name"].startswith("cronjobs.")
    ]
    assert cronjobs["spec"]["conversion"]["webhook"]["clientConfig"]["service"] == {
        "name": "cj-webhook-service",
        "namespace": NAMESPACE,
        "path": "/convert",
    }
    assert [version["served"] for version in cronjobs["spec"]["versions"]] == [True, True]
    for obj in template(helm_env):
        if obj["kind"] == "CustomResourceDefinition":  # helm uninstall leaves them
            assert obj["metadata"]["annotations"] == dict([KEEP]), obj["metadata"]["name"]


@pytest.mark.parametrize(
    ("values", "overlay"),
    [
        (("webhook.enable=true",), "default"),
        (("webhook.enable=true", "certManager.enable=true"), "certmanager"),
    ],
)
def test_webhook_values_render_config_default_and_certmanager(
    helm_env: dict[str, str], kubectl: str, values: tuple[str, ...], overlay: str
) -> None:
    chart = by_key(template(helm_env, *values))
    config = by_key(kustomize(kubectl, CONFIG / overlay), without={"Namespace"})
    assert_same(chart, config, f"{' + '.join(values)} vs config/{overlay}")


def test_webhook_without_cert_manager_has_no_certificate_or_injection(
    helm_env: dict[str, str],
) -> None:
    objects = template(helm_env, "webhook.enable=true")
    kinds = {obj["kind"] for obj in objects}
    assert {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} <= kinds
    assert not kinds & {"Certificate", "Issuer"}
    for obj in objects:
        assert "cert-manager.io/inject-ca-from" not in (obj["metadata"].get("annotations") or {})


def test_monitoring_values_render_config_prometheus_and_grafana(
    helm_env: dict[str, str], kubectl: str, config_with_prometheus: Path
) -> None:
    on = ("prometheus.enable=true", "prometheusRule.enable=true", "grafana.enable=true")
    added = by_key(template(helm_env, *on)).keys() - by_key(template(helm_env)).keys()
    chart = {key: obj for key, obj in by_key(template(helm_env, *on)).items() if key in added}
    default = by_key(kustomize(kubectl, CONFIG / "default"))
    config = {
        key: obj
        for key, obj in by_key(kustomize(kubectl, config_with_prometheus)).items()
        if key not in default
    }
    for key, obj in by_key(kustomize(kubectl, CONFIG / "grafana")).items():
        obj["metadata"]["namespace"] = NAMESPACE
        config[key] = obj
    assert {kind for kind, _ in config} >= {"ServiceMonitor", "PrometheusRule", "ConfigMap"}
    assert_same(chart, config, "prometheus/prometheusRule/grafana vs config/")


def test_non_default_values_change_what_they_say(helm_env: dict[str, str]) -> None:
    objects = template(
        helm_env,
        "nameOverride=cj",
        "manager.replicas=3",
        "manager.image.repository=registry.example/cronjob-operator",
        "manager.image.tag=v9",
        "manager.leaderElection.enable=false",
        "manager.logs.format=text",
        "manager.logs.level=debug",
        "manager.controllers.configdeployment=false",
        "manager.extraArgs={--max-concurrent-reconciles=4,--namespace=team-a}",
        "manager.resources.limits.memory=1Gi",
        "metrics.enable=false",
        "rbacHelpers.enable=false",
        "grafana.enable=true",
        "grafana.namespace=monitoring",
    )
    keyed = by_key(objects)
    deployment = keyed["Deployment", "cj-controller-manager"]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert deployment["spec"]["replicas"] == 3
    assert container["image"] == "registry.example/cronjob-operator:v9"
    assert container["args"] == [
        "run",
        "--health-probe-bind-address=:8081",
        "--metrics-bind-address=0",
        "--log-format=text",
        "--log-level=debug",
        "--no-configdeployment-controller",
        "--webhook-port=0",
        "--max-concurrent-reconciles=4",
        "--namespace=team-a",
    ]
    assert [port["name"] for port in container["ports"]] == ["health"]
    assert container["resources"]["limits"]["memory"] == "1Gi"
    assert pod["serviceAccountName"] == "cj-controller-manager"
    assert ("ServiceAccount", "cj-controller-manager") in keyed
    assert not [name for kind, name in keyed if kind == "Service"], "metrics Service is off"
    assert not [name for kind, name in keyed if name.endswith(("-admin-role", "-viewer-role"))]
    assert {obj["metadata"].get("namespace") for obj in objects if obj["kind"] == "ConfigMap"} == {
        "monitoring"
    }
    # Every binding points at a role and an account that the same render creates.
    for (kind, _), obj in keyed.items():
        if kind in {"RoleBinding", "ClusterRoleBinding"}:
            assert (obj["roleRef"]["kind"], obj["roleRef"]["name"]) in keyed
            for subject in obj["subjects"]:
                assert (subject["kind"], subject["name"]) in keyed
