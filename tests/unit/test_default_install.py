"""config/default and config/certmanager as rendered by ``kubectl kustomize``: the manager's
certificate flags name the objects that are really there, its permissions reach those
objects by name and nothing else, and cert-manager stays a complete alternative."""

from __future__ import annotations

import functools
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.runtime.certrotation import dns_names, parse_target

ROOT = Path(__file__).resolve().parents[2]
CERT_MANAGER_GROUP = "cert-manager.io"


def rendered(overlay: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(_kustomize(overlay)) if doc]


@functools.cache
def _kustomize(overlay: str) -> str:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed")
    return subprocess.run(
        [kubectl, "kustomize", str(ROOT / "config" / overlay)],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip


def flag_values(args: list[str], flag: str) -> list[str]:
    return [arg.partition("=")[2] for arg in args if arg.startswith(f"{flag}=")]


def manager_container(docs: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, Any]]:
    (deployment,) = (d for d in docs if d["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    return pod, pod["containers"][0]


def names_of(docs: list[dict[str, Any]], kind: str) -> set[str]:
    return {d["metadata"]["name"] for d in docs if d["kind"] == kind}


def test_default_needs_nothing_but_kubernetes() -> None:
    docs = rendered("default")
    assert not [d["kind"] for d in docs if d["apiVersion"].startswith(CERT_MANAGER_GROUP)]
    assert not [
        d["metadata"]["name"]
        for d in docs
        if CERT_MANAGER_GROUP + "/inject-ca-from" in (d["metadata"].get("annotations") or {})
    ]


def test_the_certificate_flags_name_the_rendered_objects() -> None:
    docs = rendered("default")
    _, manager = manager_container(docs)
    args = manager["args"]
    (namespace,) = names_of(docs, "Namespace")
    (service,) = flag_values(args, "--webhook-service")
    assert service in names_of(docs, "Service")
    targets = [parse_target(text) for text in flag_values(args, "--inject-ca-bundle")]
    assert {(t.kind.kind, t.name) for t in targets} == {
        (d["kind"], d["metadata"]["name"])
        for d in docs
        if d["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
        or (d["kind"] == "CustomResourceDefinition" and "conversion" in d["spec"])
    }
    for doc in docs:  # every webhook is called through the Service the certificate names
        configs = [w["clientConfig"] for w in doc.get("webhooks") or []]
        if doc["kind"] == "CustomResourceDefinition" and "conversion" in doc["spec"]:
            configs = [doc["spec"]["conversion"]["webhook"]["clientConfig"]]
        for config in configs:
            host = f"{config['service']['name']}.{config['service']['namespace']}.svc"
            assert host == dns_names(service, namespace)[0]


def test_the_certificate_is_served_from_a_tmpfs() -> None:
    pod, manager = manager_container(rendered("default"))
    (cert_dir,) = flag_values(manager["args"], "--webhook-cert-dir")
    (mount,) = (m for m in manager["volumeMounts"] if m["mountPath"] == cert_dir)
    assert not mount.get("readOnly")
    (volume,) = (v for v in pod["volumes"] if v["name"] == mount["name"])
    assert volume["emptyDir"]["medium"] == "Memory"


def roles_bound_to_the_manager(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The (Cluster)Roles bound to the manager's service account."""
    pod, _ = manager_container(docs)
    account = pod["serviceAccountName"]
    bound = {
        (b["roleRef"]["kind"], b["roleRef"]["name"])
        for b in docs
        if b["kind"] in ("RoleBinding", "ClusterRoleBinding")
        and any(s["name"] == account for s in b["subjects"])
    }
    return [role for role in docs if (role["kind"], role["metadata"]["name"]) in bound]


def rules_bound_to_the_manager(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rules of the (Cluster)Roles bound to the manager's service account that name
    resources by name."""
    return [
        rule
        for role in roles_bound_to_the_manager(docs)
        for rule in role["rules"]
        if rule.get("resourceNames")
    ]


def test_the_manager_may_update_exactly_its_secret_and_the_injected_objects() -> None:
    docs = rendered("default")
    _, manager = manager_container(docs)
    args = manager["args"]
    granted = {
        (resource, name)
        for rule in rules_bound_to_the_manager(docs)
        if "update" in rule["verbs"]
        for resource in rule["resources"]
        for name in rule["resourceNames"]
    }
    targets = [parse_target(text) for text in flag_values(args, "--inject-ca-bundle")]
    (secret,) = flag_values(args, "--webhook-cert-secret")
    assert granted == {(t.kind.plural, t.name) for t in targets} | {("secrets", secret)}


def test_certmanager_is_default_with_cert_managers_certificate_instead() -> None:
    docs = rendered("certmanager")
    (certificate,) = (d for d in docs if d["kind"] == "Certificate")
    _, manager = manager_container(docs)
    assert not flag_values(manager["args"], "--webhook-cert-secret")
    assert certificate["spec"]["secretName"] in {
        v["secret"]["secretName"] for v in manager_container(docs)[0]["volumes"]
    }
    annotated = {
        d["kind"]
        for d in docs
        if CERT_MANAGER_GROUP + "/inject-ca-from" in (d["metadata"].get("annotations") or {})
    }
    assert annotated == {
        "CustomResourceDefinition", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"
    }  # fmt: skip
    assert not names_of(docs, "ClusterRole") & {"cronjob-operator-webhook-cert-injector-role"}


# --- what each install path grants ------------------------------------------------------

SHARDING_ONLY = {
    ("batch.tutorial.kubebuilder.io", "cronjobs", "patch"),
    ("batch", "jobs", "patch"),
    ("coordination.k8s.io", "leases", "list"),
    ("coordination.k8s.io", "leases", "delete"),
}
"""The verbs only --sharded uses (config/sharding adds them)."""


def granted(docs: list[dict[str, Any]]) -> set[tuple[str, str, str, str]]:
    """(kind of the role, API group, resource, verb) of every rule bound to the manager's
    ServiceAccount."""
    return {
        (role["kind"], group, resource, verb)
        for role in roles_bound_to_the_manager(docs)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


def verbs(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for _, group, resource, verb in granted(docs)}


@pytest.mark.parametrize("overlay", ["local", "default", "certmanager", "namespaced"])
def test_only_a_sharded_install_grants_the_verbs_only_sharding_uses(overlay: str) -> None:
    assert not verbs(rendered(overlay)) & SHARDING_ONLY
    assert verbs(rendered("sharded")) >= SHARDING_ONLY


def test_the_manager_may_create_no_secret_its_secret_is_shipped() -> None:
    docs = rendered("default")
    assert ("", "secrets", "create") not in verbs(docs)
    _, manager = manager_container(docs)
    (secret,) = flag_values(manager["args"], "--webhook-cert-secret")
    (shipped,) = (d for d in docs if d["kind"] == "Secret")
    assert shipped["metadata"]["name"] == secret
    assert "data" not in shipped, "kubectl apply would wipe what the manager wrote"
    assert "type" not in shipped, "an install made before keeps its Secret's type"


def test_the_injecting_manager_is_held_to_the_ca_bundle_by_a_policy() -> None:
    docs = rendered("default")
    pod, _ = manager_container(docs)
    (namespace,) = names_of(docs, "Namespace")
    injected = {
        (group, resource)
        for _, group, resource, verb in granted(docs)
        if verb == "update" and group in ("admissionregistration.k8s.io", "apiextensions.k8s.io")
    }
    assert injected  # config/default's manager injects its CA
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    holding = [
        policies[b["spec"]["policyName"]]
        for b in docs
        if b["kind"] == "ValidatingAdmissionPolicyBinding"
        and b["spec"]["paramRef"]
        == {
            "name": pod["serviceAccountName"],
            "namespace": namespace,
            "parameterNotFoundAction": "Allow",
        }
        and b["spec"]["validationActions"] == ["Deny"]
    ]
    matched = {
        (group, resource)
        for policy in holding
        for rule in policy["spec"]["matchConstraints"]["resourceRules"]
        if "UPDATE" in rule["operations"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        if "caBundle" in yaml.safe_dump(policy["spec"]["validations"])
        or "caBundle" in yaml.safe_dump(policy["spec"]["variables"])
    }
    assert injected <= matched


def test_the_namespaced_manager_holds_no_cluster_wide_write() -> None:
    writes = {"create", "update", "patch", "delete"}
    cluster_wide = {
        (group, resource, verb)
        for kind, group, resource, verb in granted(rendered("namespaced"))
        if kind == "ClusterRole" and verb in writes
    }
    assert cluster_wide == {
        ("authentication.k8s.io", "tokenreviews", "create"),
        ("authorization.k8s.io", "subjectaccessreviews", "create"),
    }


def test_namespaced_installs_share_one_identical_sharding_binding(tmp_path: Path) -> None:
    """Two namespaced installs (a kustomization of one's own setting `namespace:` over
    config/namespaced) apply the same cluster-scoped binding: neither overwrites the
    other's manager. Its paramRef names no namespace: the API server takes the
    ServiceAccount in the namespace of the object under review."""
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    overlay = config / "team-a"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"namespace": "team-a", "resources": ["../namespaced"]})
    )
    bindings = [
        [d for d in rendered(str(directory)) if d["kind"] == "ValidatingAdmissionPolicyBinding"]
        for directory in (config / "namespaced", overlay)
    ]
    for binding in bindings[0]:
        assert "namespace" not in binding["spec"]["paramRef"]
    shared = {b["metadata"]["name"]: b["spec"] for b in bindings[0]}
    assert {b["metadata"]["name"]: b["spec"] for b in bindings[1]} == shared


def test_a_second_namespaced_install_with_its_own_prefix_has_a_binding_of_its_own(
    tmp_path: Path,
) -> None:
    """A second install sets a ``namePrefix:`` of its own (its metrics ClusterRoleBinding
    needs one): its policy and binding are then its own, each naming its own manager, so
    removing one install (``kubectl delete -k``) leaves the other's binding in place."""
    config = tmp_path / "config"
    shutil.copytree(ROOT / "config", config)
    bindings = {}
    for team in ("team-a", "team-b"):
        overlay = config / team
        overlay.mkdir()
        kustomization = {
            "namespace": team,
            "namePrefix": f"{team}-",
            "resources": ["../namespaced"],
        }
        (overlay / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
        [binding] = [
            d for d in rendered(str(overlay)) if d["kind"] == "ValidatingAdmissionPolicyBinding"
        ]
        bindings[team] = binding
    names = {team: binding["metadata"]["name"] for team, binding in bindings.items()}
    assert len(set(names.values())) == 2, names
    for team, binding in bindings.items():
        assert binding["spec"]["policyName"].startswith(f"{team}-")
        assert binding["spec"]["paramRef"]["name"].startswith(f"{team}-")
