"""Least privilege on the real API server: the sharding policy and the namespaced install.

config/policy's ValidatingAdmissionPolicy: a tenant bound to the shipped cronjob-editor
role (impersonated with ``kubectl --as``) is refused setting, changing or removing the
sharding labels and annotations of a CronJob, and a Job's bucket label, with the policy's
message; the manager's ServiceAccount (impersonated too, with its own RBAC) may, and the
tenant's other edits go through. config/namespaced: the manager with ``--namespace``
runs both controllers with a token of its ServiceAccount, bound only to Roles; a Secret
change still rolls a ConfigDeployment, a CronJob's run takes a ConcurrencyGroup's slot,
any RBAC denial the manager logs fails the test, and the same account may read Secrets
and write Deployments and Jobs nowhere else; a second namespaced install (another
namespace) leaves the first's manager the manager of its namespace's sharding labels.
config/default's caBundle policy: the manager's ServiceAccount may change the
``clientConfig.caBundle`` of the webhook configurations and nothing else of them or of
the CronJob CRD (server-side dry runs, so a policy that failed would change nothing),
while an administrator's edits go through.

Owner references: the local control plane runs the ``OwnerReferencesPermissionEnforcement``
admission plugin, as OpenShift does. The manager's ServiceAccount with the shipped RBAC
creates a Job owned by a CronJob and a Deployment owned by a ConfigDeployment, each with
``blockOwnerDeletion: true`` as the controllers build them; the same role without its
``finalizers`` rules is refused exactly those (and admitted without the flag).

Each test applies its overlay's render without the CRDs (the session installed them and
other tests need them) and the Deployment (the manager runs here), and deletes it after.
"""

from __future__ import annotations

import base64
import functools
import json
import shutil
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronjob_operator.api.concurrencygroup_v1 import CONCURRENCY_GROUP as GROUP_KIND
from cronjob_operator.controllers import concurrencygroup, configdeployment, cronjob
from cronjob_operator.controllers.configdeployment import CONFIG_HASH_ANNOTATION, decide
from cronjob_operator.controllers.cronjob import jobs
from cronjob_operator.envtest import ControlPlane, wait_for
from cronjob_operator.runtime.certrotation import dns_names, make_pair
from cronjob_operator.runtime.clock import FakeClock
from cronjob_operator.runtime.controller import Controller
from cronjob_operator.runtime.controllerutil import parse_time
from cronjob_operator.runtime.kinds import SECRET
from cronjob_operator.runtime.leaderelection import LeaderElectionConfig
from cronjob_operator.runtime.manager import Manager, Options
from cronjob_operator.runtime.sharding import (
    BUCKET_LABEL,
    DRAIN_LABEL,
    PREVIOUS_ANNOTATION,
    SHARD_LABEL,
)
from tests.integration.support import (
    REPO,
    Denials,
    install_crds,
    running_manager,
)

SYSTEM = "cronjob-operator-system"
SERVICE_ACCOUNT = "cronjob-operator-controller-manager"
MANAGER = f"system:serviceaccount:{SYSTEM}:{SERVICE_ACCOUNT}"
TENANT = "tenant-alice"
CRONJOBS = "cronjobs.batch.tutorial.kubebuilder.io"
LABELS_REFUSED = (
    f"only the cronjob-operator manager ({MANAGER}) may set, change or remove the "
    "sharding.cronjob-operator.io/ labels"
)
ANNOTATIONS_REFUSED = (
    f"only the cronjob-operator manager ({MANAGER}) may set, change or remove the "
    "sharding.cronjob-operator.io/ annotations"
)


def rendered(control_plane: ControlPlane, overlay: str | Path) -> str:
    """The overlay's objects without the CRDs and the Deployment, as a YAML stream."""
    output = control_plane.kubectl("kustomize", str(REPO / "config" / overlay), check=True)
    kept = [
        doc
        for doc in yaml.safe_load_all(output.stdout)
        if doc and doc["kind"] not in {"CustomResourceDefinition", "Deployment"}
    ]
    return yaml.safe_dump_all(kept)


def install(
    control_plane: ControlPlane, overlay: str | Path, namespace: str = SYSTEM
) -> Iterator[None]:
    """Apply ``rendered(overlay)`` for one test (the CRDs installed first); delete it and
    wait for its ``namespace`` to go."""
    install_crds(control_plane)
    stream = rendered(control_plane, overlay)
    try:
        control_plane.kubectl("apply", "-f", "-", input=stream, check=True)
        yield
    finally:
        control_plane.kubectl(
            "delete", "-f", "-", "--ignore-not-found", "--timeout=120s", input=stream, check=True
        )
        wait_for(
            lambda: control_plane.kubectl("get", "namespace", namespace).returncode != 0,
            120,
            message=f"namespace {namespace} deleted",
        )


SAMPLE_CRONJOB = yaml.safe_load((REPO / "config" / "samples" / "batch_v1_cronjob.yaml").read_text())


def cronjob_body(name: str, labels: dict[str, str] | None = None) -> str:
    """The sample CronJob, named ``name``, with only ``labels``."""
    body = {**SAMPLE_CRONJOB, "metadata": {"name": name, "labels": labels or {}}}
    return json.dumps(body)


def job_body(name: str, labels: dict[str, str]) -> str:
    """A suspended Job of the sample CronJob's template (no Pod runs), with ``labels``."""
    spec = {**SAMPLE_CRONJOB["spec"]["jobTemplate"]["spec"], "suspend": True}
    body = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name, "labels": labels}}
    return json.dumps({**body, "spec": spec})


@pytest.fixture
def policy_installed(control_plane: ControlPlane) -> Iterator[None]:
    """config/sharded: the policy, and the manager's RBAC with the sharding verbs."""
    yield from install(control_plane, "sharded")


@pytest.fixture
def tenant(control_plane: ControlPlane, namespace: str) -> str:
    """``namespace``, where TENANT may edit CronJobs (the shipped editor role) and Jobs."""
    control_plane.kubectl(
        "create", "rolebinding", "tenant-cronjobs", "-n", namespace,
        "--clusterrole=cronjob-operator-cronjob-editor-role", f"--user={TENANT}",
        check=True,
    )  # fmt: skip
    control_plane.kubectl(
        "create", "role", "jobs", "-n", namespace,
        "--verb=get,create,update,patch", "--resource=jobs",
        check=True,
    )  # fmt: skip
    control_plane.kubectl(
        "create", "rolebinding", "tenant-jobs", "-n", namespace, "--role=jobs",
        f"--user={TENANT}",
        check=True,
    )  # fmt: skip
    return namespace


def test_only_the_manager_may_touch_the_sharding_labels(
    control_plane: ControlPlane, policy_installed: None, tenant: str
) -> None:
    def as_user(user: str, *args: str, input: str | None = None) -> tuple[bool, str]:
        done = control_plane.kubectl(f"--as={user}", "-n", tenant, *args, input=input)
        return done.returncode == 0, done.stderr

    def refused(result: tuple[bool, str], message: str) -> bool:
        return not result[0] and message in result[1]

    labelled = cronjob_body("labelled", {SHARD_LABEL: "m1"})
    answers: list[tuple[bool, str]] = []

    def tenant_refused_a_labelled_create() -> bool:
        answers.append(as_user(TENANT, "create", "--dry-run=server", "-f", "-", input=labelled))
        return refused(answers[-1], LABELS_REFUSED)

    wait_for(  # the API server loads a new policy asynchronously
        tenant_refused_a_labelled_create,
        60,
        interval=0.5,
        message="the policy refuses the tenant a CronJob created with a shard label",
        detail=lambda: f"last answer: {answers[-1]}",
    )
    assert as_user(TENANT, "create", "-f", "-", input=cronjob_body("plain")) == (True, "")

    def label(user: str, *labels: str) -> tuple[bool, str]:
        return as_user(user, "label", "--overwrite", CRONJOBS, "plain", *labels)

    assert refused(label(TENANT, f"{SHARD_LABEL}=m1"), LABELS_REFUSED)
    assert label(MANAGER, f"{SHARD_LABEL}=m1")[0]
    assert refused(label(TENANT, f"{SHARD_LABEL}=m2"), LABELS_REFUSED)
    assert refused(label(TENANT, f"{SHARD_LABEL}-"), LABELS_REFUSED)
    assert refused(label(TENANT, f"{DRAIN_LABEL}=m1"), LABELS_REFUSED)
    assert refused(
        as_user(TENANT, "annotate", CRONJOBS, "plain", f"{PREVIOUS_ANNOTATION}=m0"),
        ANNOTATIONS_REFUSED,
    )
    assert label(TENANT, "team=payments")[0], "other labels stay the tenant's"
    assert label(MANAGER, f"{DRAIN_LABEL}=m1")[0]
    assert label(MANAGER, f"{SHARD_LABEL}-", f"{DRAIN_LABEL}-")[0]
    stored = control_plane.kubectl_json("get", CRONJOBS, "plain", "-n", tenant)
    assert stored["metadata"]["labels"] == {"team": "payments"}

    bucketed = job_body("bucketed", {BUCKET_LABEL: "7"})
    assert refused(as_user(TENANT, "create", "-f", "-", input=bucketed), LABELS_REFUSED)
    assert as_user(MANAGER, "create", "--dry-run=server", "-f", "-", input=bucketed)[0]
    assert as_user(TENANT, "create", "-f", "-", input=job_body("unlabelled", {}))[0]


@pytest.fixture
def namespaced_installed(control_plane: ControlPlane) -> Iterator[None]:
    yield from install(control_plane, "namespaced")


def can_i(control_plane: ControlPlane, *args: str) -> str:
    done = control_plane.kubectl("auth", "can-i", f"--as={MANAGER}", *args)
    return done.stdout.strip()


def test_the_namespaced_install_grants_only_its_namespace(
    control_plane: ControlPlane, namespaced_installed: None, namespace: str
) -> None:
    assert control_plane.kubectl("get", "clusterrole", "cronjob-operator-manager-role").returncode
    for verb, resource in (
        ("list", "secrets"),
        ("create", "deployments.apps"),
        ("create", "jobs.batch"),
        ("list", "pods"),  # a run past spec.runStartTimeoutSeconds: its Pods, for the cause
    ):
        assert can_i(control_plane, verb, resource, "-n", SYSTEM) == "yes"
        assert can_i(control_plane, verb, resource, "-n", namespace) == "no"
        assert can_i(control_plane, verb, resource, "--all-namespaces") == "no"


def test_the_namespaced_manager_does_its_job_with_only_roles(
    control_plane: ControlPlane, namespaced_installed: None, tmp_path: Path, denials: Denials
) -> None:
    kubeconfig = control_plane.token_kubeconfig(
        SYSTEM, SERVICE_ACCOUNT, tmp_path / "manager.kubeconfig"
    )
    clock = FakeClock()
    options = Options(
        namespace=SYSTEM,  # --namespace, as config/namespaced passes it
        health_probe_bind_address="0",
        leader_election=LeaderElectionConfig(name="cronjob-operator-test", namespace=SYSTEM),
    )
    control_plane.kubectl("apply", "-k", str(REPO / "config" / "samples"), "-n", SYSTEM, check=True)
    control_plane.kubectl(
        "create", "secret", "generic", "db", "-n", SYSTEM, "--from-literal=password=one",
        check=True,
    )  # fmt: skip
    control_plane.kubectl(
        "patch", "configdeployment", "configdeployment-sample", "-n", SYSTEM, "--type=merge",
        "-p", '{"spec": {"secrets": [{"name": "db"}]}}',
        check=True,
    )  # fmt: skip
    # The sample's runs take a slot of a ConcurrencyGroup: the role reads and writes it.
    group = {"apiVersion": GROUP_KIND.api_version, "kind": GROUP_KIND.kind,
             "metadata": {"name": "sample"}, "spec": {"limit": 1}}  # fmt: skip
    control_plane.kubectl("apply", "-n", SYSTEM, "-f", "-", input=json.dumps(group), check=True)
    control_plane.kubectl(
        "patch", CRONJOBS, "cronjob-sample", "-n", SYSTEM, "--type=merge",
        "-p", '{"spec": {"concurrencyGroup": {"name": "sample"}}}',
        check=True,
    )  # fmt: skip
    setups: dict[str, Callable[[Manager], Controller]] = {
        "cronjob": functools.partial(cronjob.setup, clock=clock),
        "concurrencygroup": functools.partial(concurrencygroup.setup, clock=clock),
        "configdeployment": configdeployment.setup,
    }
    with running_manager(control_plane, setups, options=options, kubeconfig=kubeconfig) as operator:
        wait_for(
            lambda: operator.manager.elector is not None and operator.manager.elector.is_leader,
            60,
            message="leader",
        )

        def pod_hash() -> str | None:
            deployment = control_plane.kubectl_json(
                "get", "deployment", "configdeployment-sample", "-n", SYSTEM
            )
            annotations = deployment["spec"]["template"]["metadata"].get("annotations") or {}
            return annotations.get(CONFIG_HASH_ANNOTATION)  # type: ignore[no-any-return]

        first = wait_for(pod_hash, 60, message="a Deployment with the hash", ignore=(Exception,))
        rotated = control_plane.kubectl(
            "create", "secret", "generic", "db", "-n", SYSTEM, "--from-literal=password=two",
            "--dry-run=client", "-o", "json",
        ).stdout  # fmt: skip
        control_plane.kubectl("replace", "-f", "-", input=rotated, check=True)
        wait_for(lambda: pod_hash() not in {None, first}, 60, message="the Secret change rolled")
        cached = operator.manager.cache.get(SECRET, "db", SYSTEM)
        assert "keyDigests" not in cached, "the Secret informer holds metadata only"

        created = parse_time(
            control_plane.kubectl_json("get", CRONJOBS, "cronjob-sample", "-n", SYSTEM)["metadata"][
                "creationTimestamp"
            ]
        )
        assert created is not None
        scheduled = created.replace(second=0, microsecond=0) + timedelta(minutes=1)
        clock.set(scheduled + timedelta(seconds=1))
        operator.kick("cronjob", SYSTEM, "cronjob-sample")
        job = f"cronjob-sample-{int(scheduled.timestamp())}"
        wait_for(
            lambda: control_plane.kubectl("get", "job", job, "-n", SYSTEM).returncode == 0,
            60,
            message=f"Job {job} created",
        )
        holders = control_plane.kubectl_json("get", GROUP_KIND.plural, "sample", "-n", SYSTEM)[
            "status"
        ]["holders"]
        assert [holder["job"] for holder in holders] == [job]
    assert denials.lines == [], "config/namespaced lacks a permission the manager needs"


WITHOUT_FINALIZERS = "manager-without-finalizers"
"""A user bound to the manager's shipped ClusterRole less its ``finalizers`` rules."""
BLOCK_REFUSED = "cannot set blockOwnerDeletion if an ownerReference refers to a resource"


def role_without_finalizers() -> list[dict[str, Any]]:
    """config/rbac's manager role less its ``*/finalizers`` rules, bound to WITHOUT_FINALIZERS."""
    role = yaml.safe_load((REPO / "config" / "rbac" / "role.yaml").read_text())
    rules = [
        rule
        for rule in role["rules"]
        if not any(resource.endswith("/finalizers") for resource in rule["resources"])
    ]
    assert len(rules) == len(role["rules"]) - 2, "the CronJob's and the ConfigDeployment's"
    role = {**role, "metadata": {"name": WITHOUT_FINALIZERS}, "rules": rules}
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": WITHOUT_FINALIZERS},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": WITHOUT_FINALIZERS},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": WITHOUT_FINALIZERS}],
    }  # fmt: skip
    return [role, binding]


@pytest.fixture
def without_finalizers(control_plane: ControlPlane) -> Iterator[str]:
    stream = yaml.safe_dump_all(role_without_finalizers())
    control_plane.kubectl("apply", "-f", "-", input=stream, check=True)
    try:
        yield WITHOUT_FINALIZERS
    finally:
        control_plane.kubectl("delete", "-f", "-", "--ignore-not-found", input=stream, check=True)


def owned_objects(control_plane: ControlPlane, namespace: str) -> list[dict[str, Any]]:
    """A Job of the sample CronJob and a Deployment of the sample ConfigDeployment, each
    as its controller builds it (owner reference with ``blockOwnerDeletion: true``), the
    owners created in ``namespace`` by the admin; the Job suspended, no replicas."""
    samples = REPO / "config" / "samples"
    owners = {}
    for kind, sample in (
        (CRONJOBS, "batch_v1_cronjob.yaml"),
        ("configdeployments.apps.tutorial.kubebuilder.io", "apps_v1_configdeployment.yaml"),
    ):
        control_plane.kubectl("create", "-n", namespace, "-f", str(samples / sample), check=True)
        name = yaml.safe_load((samples / sample).read_text())["metadata"]["name"]
        owners[kind] = control_plane.kubectl_json("get", kind, name, "-n", namespace)
    job = jobs.job_from_template(owners[CRONJOBS], name="owned-run", annotations={})
    job["spec"]["suspend"] = True
    deployment = decide.desired_deployment(
        owners["configdeployments.apps.tutorial.kubebuilder.io"], "0" * 64
    )
    deployment["spec"]["replicas"] = 0
    return [job, deployment]


def test_the_manager_may_block_its_owners_deletion_as_the_admission_plugin_requires(
    control_plane: ControlPlane, policy_installed: None, namespace: str, without_finalizers: str
) -> None:
    def create_as(user: str, obj: dict[str, Any]) -> tuple[bool, str]:
        done = control_plane.kubectl(
            f"--as={user}", "create", "-n", namespace, "-f", "-", input=json.dumps(obj)
        )
        return done.returncode == 0, done.stderr

    def may_create_jobs(user: str) -> bool:
        answer = control_plane.kubectl(
            "auth", "can-i", "create", "jobs.batch", f"--as={user}", "-n", namespace
        )
        return answer.stdout.strip() == "yes"

    for user in (MANAGER, without_finalizers):  # the bindings just applied are in force
        wait_for(functools.partial(may_create_jobs, user), 60, interval=0.5, message=f"{user} RBAC")
    for obj in owned_objects(control_plane, namespace):
        [reference] = obj["metadata"]["ownerReferences"]
        assert reference["blockOwnerDeletion"] is True
        name = f"{obj['kind']} {obj['metadata']['name']}"
        admitted, answer = create_as(without_finalizers, obj)
        assert not admitted, f"{name}: the admission plugin is off (created without the rule)"
        assert BLOCK_REFUSED in answer, answer
        unblocking = json.loads(json.dumps(obj))
        unblocking["metadata"]["ownerReferences"][0]["blockOwnerDeletion"] = False
        unblocking["metadata"]["name"] += "-unblocking"
        admitted, answer = create_as(without_finalizers, unblocking)
        assert admitted, f"{name} without blockOwnerDeletion: {answer}"
        admitted, answer = create_as(MANAGER, obj)
        assert admitted, f"{name}: the shipped role is refused: {answer}"


# --- two namespaced installs -----------------------------------------------------------

OTHER = "cronjob-operator-team-b"


@pytest.fixture
def two_namespaced_installs(control_plane: ControlPlane, tmp_path: Path) -> Iterator[None]:
    """config/namespaced in SYSTEM, then the same in OTHER (a kustomization setting only
    `namespace:` over it, as docs/security.md says), applied after."""
    config = tmp_path / "config"
    shutil.copytree(REPO / "config", config)
    overlay = config / "team-b"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump({"namespace": OTHER, "resources": ["../namespaced"]})
    )
    first = install(control_plane, "namespaced")
    next(first)
    try:
        yield from install(control_plane, overlay, OTHER)
    finally:
        next(first, None)


@pytest.mark.usefixtures("two_namespaced_installs")
def test_a_second_namespaced_install_leaves_the_first_its_sharding_labels(
    control_plane: ControlPlane,
) -> None:
    """Before: both installs applied one binding name, the second's paramRef (its own
    ServiceAccount) replaced the first's, and the first manager was refused its own
    Jobs' bucket label. Each manager may create Jobs in its namespace (its Role)."""
    other_manager = f"system:serviceaccount:{OTHER}:{SERVICE_ACCOUNT}"
    bucketed = job_body("bucketed", {BUCKET_LABEL: "7"})

    def create_as(user: str, namespace: str) -> tuple[bool, str]:
        done = control_plane.kubectl(
            f"--as={user}", "-n", namespace, "create", "--dry-run=server", "-f", "-",
            input=bucketed,
        )  # fmt: skip
        return done.returncode == 0, done.stderr

    answers: list[tuple[bool, str]] = []

    def tenant_refused() -> bool:  # the API server loads a new binding asynchronously
        answers.append(create_as(TENANT, SYSTEM))
        return not answers[-1][0] and "may set, change or remove" in answers[-1][1]

    control_plane.kubectl(
        "create", "rolebinding", "tenant-jobs", "-n", SYSTEM,
        "--role=cronjob-operator-manager-role", f"--user={TENANT}",
        check=True,
    )  # fmt: skip
    wait_for(tenant_refused, 60, interval=0.5, message="the policy refuses the tenant",
             detail=lambda: f"last answer: {answers[-1]}")  # fmt: skip
    for manager, namespace in ((MANAGER, SYSTEM), (other_manager, OTHER)):
        created, stderr = create_as(manager, namespace)  # stderr: Pod Security warnings
        assert created, stderr


# --- the injector may change only the caBundle ------------------------------------------

VALIDATING = "cronjob-operator-validating-webhook-configuration"
MUTATING = "cronjob-operator-mutating-webhook-configuration"
CA_BUNDLE_ONLY = (
    f"the cronjob-operator manager ({MANAGER}) may change only the clientConfig.caBundle"
)


@pytest.fixture
def default_installed(control_plane: ControlPlane) -> Iterator[None]:
    """config/default without its CRDs and Deployment: the webhook configurations (no
    server behind them: this test writes no CronJob), the injector's RBAC and policy."""
    yield from install(control_plane, "default")


def replaced_as(
    control_plane: ControlPlane, user: str | None, obj: dict[str, Any]
) -> tuple[bool, str]:
    """An update (a PUT, as the manager sends it) as ``user`` (None: the administrator),
    dry run. Raw, because ``kubectl replace`` would also rewrite the object's
    last-applied-configuration annotation (the install is applied with kubectl apply)."""
    plural = {
        "ValidatingWebhookConfiguration": "validatingwebhookconfigurations",
        "MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
        "CustomResourceDefinition": "customresourcedefinitions",
    }[obj["kind"]]
    path = f"/apis/{obj['apiVersion']}/{plural}/{obj['metadata']['name']}?dryRun=All"
    impersonate = [f"--as={user}"] if user else []
    done = control_plane.kubectl(
        *impersonate, "replace", f"--raw={path}", "-f", "-", input=json.dumps(obj)
    )
    return done.returncode == 0, done.stderr


def refused_as_not_the_ca_bundle(answer: tuple[bool, str]) -> bool:
    return not answer[0] and CA_BUNDLE_ONLY in answer[1]


Edit = Callable[[dict[str, Any]], None]


def edited(obj: dict[str, Any], edit: Edit) -> dict[str, Any]:
    copy: dict[str, Any] = json.loads(json.dumps(obj))
    edit(copy)
    return copy


def new_bundle(obj: dict[str, Any]) -> None:
    bundle = make_pair(dns_names("x", "y"), now=datetime.now(UTC), validity=timedelta(days=1))
    for hook in obj["webhooks"]:
        hook["clientConfig"]["caBundle"] = base64.b64encode(bundle.ca_bundle).decode()


def first_hook(edit: Callable[[dict[str, Any]], None]) -> Edit:
    return lambda obj: edit(obj["webhooks"][0])


WEBHOOK_EDITS: dict[str, Edit] = {
    "timeout": first_hook(lambda hook: hook.update(timeoutSeconds=3)),
    "rules": first_hook(lambda hook: hook["rules"][0].update(resources=["secrets"])),
    "service path": first_hook(lambda hook: hook["clientConfig"]["service"].update(path="/x")),
    "url": first_hook(lambda hook: hook.update(clientConfig={"url": "https://example.test/"})),
    "namespace selector": first_hook(
        lambda hook: hook.update(namespaceSelector={"matchLabels": {"a": "b"}})
    ),
    "failure policy": first_hook(lambda hook: hook.update(failurePolicy="Ignore")),
    "a webhook removed": lambda obj: obj["webhooks"].pop(),
    "a label": lambda obj: obj["metadata"].setdefault("labels", {}).update(x="y"),
    "an annotation": lambda obj: obj["metadata"].setdefault("annotations", {}).update(x="y"),
}


@pytest.mark.usefixtures("default_installed")
def test_the_injecting_manager_may_change_only_the_ca_bundle(control_plane: ControlPlane) -> None:
    validating = control_plane.kubectl_json("get", "validatingwebhookconfiguration", VALIDATING)
    answers: list[tuple[bool, str]] = []

    def timeout_refused() -> bool:  # the API server loads a new policy asynchronously
        answers.append(
            replaced_as(control_plane, MANAGER, edited(validating, WEBHOOK_EDITS["timeout"]))
        )
        return not answers[-1][0] and CA_BUNDLE_ONLY in answers[-1][1]

    wait_for(timeout_refused, 60, interval=0.5, message="the caBundle policy refuses",
             detail=lambda: f"last answer: {answers[-1]}")  # fmt: skip
    mutating = control_plane.kubectl_json("get", "mutatingwebhookconfiguration", MUTATING)
    for obj in (validating, mutating):
        assert replaced_as(control_plane, MANAGER, edited(obj, new_bundle)) == (True, "")
        for what, edit in WEBHOOK_EDITS.items():
            answer = replaced_as(control_plane, MANAGER, edited(obj, edit))
            assert refused_as_not_the_ca_bundle(answer), f"{obj['kind']}: {what}: {answer}"
            assert replaced_as(control_plane, None, edited(obj, edit)) == (True, ""), what
    mutated = edited(mutating, first_hook(lambda hook: hook.update(reinvocationPolicy="IfNeeded")))
    assert refused_as_not_the_ca_bundle(replaced_as(control_plane, MANAGER, mutated))

    crd = control_plane.kubectl_json("get", "crd", CRONJOBS)
    assert replaced_as(control_plane, MANAGER, crd) == (True, "")  # nothing changed
    for what, edit in {
        "a label": WEBHOOK_EDITS["a label"],
        "a short name": lambda obj: obj["spec"]["names"].update(shortNames=["cj"]),
        "a version unserved": lambda obj: obj["spec"]["versions"][0].update(served=False),
        "conversion": lambda obj: obj["spec"].update(
            conversion={
                "strategy": "Webhook",
                "webhook": {
                    "conversionReviewVersions": ["v1"],
                    "clientConfig": {"url": "https://example.test/"},
                },
            }
        ),
    }.items():
        answer = replaced_as(control_plane, MANAGER, edited(crd, edit))
        assert refused_as_not_the_ca_bundle(answer), f"CRD: {what}: {answer}"
