"""A CronJob stored while the webhooks were off, on the real API server (issue 47, part 2).

The validating webhook ratchets (``runtime.webhook``): a no-op update, a metadata update
and a change of another field of a stored CronJob that no longer validates are admitted,
through v1 and through v2; a write of another bad value is refused. ``migrate-storage``
moves such a CronJob to v2; an object that the API server does refuse (here a
ValidatingAdmissionPolicy) is skipped and named, the others are moved, ``storedVersions``
is left as it was and the command exits 1; once the refusal is gone a rerun trims it.

The webhooks are ``test_webhooks``' (its ``env`` fixture: the in-process server with
every route, both configurations and the conversion webhook, v2 served). "Webhooks off"
is its validating configuration deleted while the bad CronJob is created, then put back.
etcd's own keys show which version each object is stored as.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cronjob_operator import migrate
from cronjob_operator.api import batch_v1, batch_v2
from cronjob_operator.envtest import wait_for
from cronjob_operator.runtime import RestClient, errors, load_configuration
from cronjob_operator.runtime.client import PatchType
from tests.integration.support import policy_denying
from tests.integration.test_storage_migration import crd_status_versions, stored_versions_by_name
from tests.integration.test_webhooks import (
    CONFIGURATION_NAMES,
    GROUP,
    TIMEOUT,
    Env,
    _apply_configurations,
    a_cronjob,
    env,  # noqa: F401 (the module fixture: webhooks registered, v2 served)
)

pytestmark = pytest.mark.cluster

V1, V2 = batch_v1.CRONJOB, batch_v2.CRONJOB
BAD = "stored-bad"
BAD_SCHEDULE = "60 * * * *"
"""A string the CRD schema accepts and the validating webhook refuses."""
VALIDATING = CONFIGURATION_NAMES["ValidatingWebhookConfiguration"]
FROZEN_MESSAGE = "CronJobs labelled frozen are not written"
VETOED = "vetoed"
"""The CronJob labelled frozen: listed after ``BAD``, so the walk meets ``BAD`` first."""


def webhook_refuses(webhooks: Env) -> bool:
    """Whether a create of a CronJob with ``BAD_SCHEDULE`` is refused by the webhook now."""
    name = f"probe-{time.monotonic_ns()}"
    probe = json.dumps(a_cronjob(name, webhooks.namespace, schedule=BAD_SCHEDULE))
    result = webhooks.kubectl("create", "--dry-run=server", "-f", "-", input=probe)
    return result.returncode != 0 and "minute 60 is out of range" in result.stderr


@pytest.fixture(scope="module")
def rest(env: Env) -> Iterator[RestClient]:  # noqa: F811 (env: the imported fixture)
    client = RestClient(load_configuration(str(env.cp.kubeconfig)))
    yield client
    client.close()


@pytest.fixture(scope="module")
def stored_bad(env: Env) -> str:  # noqa: F811
    """CronJob ``BAD`` (schedule ``BAD_SCHEDULE``), created with the validating webhook
    configuration deleted, which is then registered again."""
    deleted = env.kubectl("delete", "ValidatingWebhookConfiguration", VALIDATING)
    assert deleted.returncode == 0, deleted.stderr
    try:
        obj = a_cronjob(BAD, env.namespace, schedule=BAD_SCHEDULE)
        wait_for(lambda: env.apply(obj).returncode == 0, TIMEOUT, message="created, webhook off")
    finally:
        _apply_configurations(env, (env.cert_dir / "ca.crt").read_bytes())
    wait_for(lambda: webhook_refuses(env), TIMEOUT, message="the webhook back")
    return BAD


def test_a_stored_bad_cronjob_takes_updates_that_leave_its_schedule_as_it_was(
    env: Env,  # noqa: F811
    rest: RestClient,
    stored_bad: str,
) -> None:
    path = V1.object_path(env.namespace, stored_bad)
    env.calls.clear()
    rest.request("PUT", path, body=rest.request("GET", path))  # a no-op update
    assert env.validated(stored_bad), "the API server asked the validating webhook"

    as_v2 = V2.object_path(env.namespace, stored_bad)
    rest.request("PUT", as_v2, body=rest.request("GET", as_v2))  # judged converted to v1

    for patch in ({"metadata": {"labels": {"team": "a"}}}, {"spec": {"suspend": True}}):
        rest.request("PATCH", path, body=patch, content_type=PatchType.MERGE)
    stored = rest.request("GET", path)
    assert stored["metadata"]["labels"] == {"team": "a"}
    assert stored["spec"]["suspend"] is True
    assert stored["spec"]["schedule"] == BAD_SCHEDULE

    with pytest.raises(errors.Invalid) as refused:
        rest.request(
            "PATCH", path, body={"spec": {"schedule": "61 * * * *"}}, content_type=PatchType.MERGE
        )
    assert 'spec.schedule: Invalid value: "61 * * * *": minute 61' in str(refused.value)
    assert BAD_SCHEDULE not in str(refused.value), "only the error the update causes"


def frozen_policy(namespace: str) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and binding) refusing every UPDATE of a CronJob
    labelled ``frozen`` in ``namespace``: a refusal from the API server itself."""
    rule = {"apiGroups": [GROUP], "apiVersions": ["*"], "operations": ["UPDATE"]}
    return policy_denying(
        f"freeze-{namespace}",
        namespace,
        rule | {"resources": ["cronjobs"]},
        expression="!has(object.metadata.labels) || !('frozen' in object.metadata.labels)",
        message=FROZEN_MESSAGE,
    )


def frozen_is_refused(webhooks: Env) -> bool:
    result = webhooks.kubectl(
        "label", f"cronjobs.v1.{GROUP}", VETOED, "probe=1", "-n", webhooks.namespace,
        "--dry-run=server",
    )  # fmt: skip
    return result.returncode != 0 and FROZEN_MESSAGE in result.stderr


def migrate_to_v2(webhooks: Env) -> subprocess.CompletedProcess[str]:
    """``cronjob-operator migrate-storage --to v2`` as a user runs it; prints its figures."""
    command = [sys.executable, "-m", "cronjob_operator", "migrate-storage", "--to", "v2"]
    command += ["--kubeconfig", str(webhooks.cp.kubeconfig)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    print(f"\nexit {result.returncode}\n{result.stderr}{result.stdout}")
    return result


def skip_mark(rest: RestClient) -> str | None:
    annotations = rest.request("GET", migrate.CRD_PATH)["metadata"].get("annotations") or {}
    return annotations.get(migrate.SKIPPED_ANNOTATION)  # type: ignore[no-any-return]


def test_migrate_storage_moves_a_stored_bad_cronjob_and_skips_one_the_api_server_refuses(
    env: Env,  # noqa: F811
    rest: RestClient,
    stored_bad: str,
) -> None:
    for index in range(3):
        assert env.apply(a_cronjob(f"good-{index}", env.namespace)).returncode == 0
    frozen = a_cronjob(VETOED, env.namespace)
    frozen["metadata"]["labels"] = {"frozen": "true"}
    assert env.apply(frozen).returncode == 0
    everything = {"good-0", "good-1", "good-2", stored_bad, VETOED}
    assert stored_versions_by_name(env.cp, env.namespace) == dict.fromkeys(
        everything, V1.api_version
    )
    policy = frozen_policy(env.namespace)
    try:
        for obj in policy:
            assert env.apply(obj).returncode == 0
        wait_for(lambda: frozen_is_refused(env), TIMEOUT, message="the policy in force")

        first = migrate_to_v2(env)
        assert first.returncode == 1
        assert "Traceback" not in first.stderr
        skipped = [line for line in first.stderr.splitlines() if " skipped " in line]
        assert len(skipped) == 1, first.stderr
        assert skipped[0].startswith(f"migrate-storage: skipped CronJob {env.namespace}/{VETOED}: ")
        assert FROZEN_MESSAGE in skipped[0]
        assert "1 skipped (refused by the API server, each named above)" in first.stdout
        assert "storedVersions left as it was" in first.stdout
        by_name = stored_versions_by_name(env.cp, env.namespace)
        assert by_name == dict.fromkeys(everything - {VETOED}, V2.api_version) | {
            VETOED: V1.api_version
        }
        assert crd_status_versions(rest) == ["v1", "v2"]
        assert skip_mark(rest) == "v2"
    finally:
        for obj in reversed(policy):
            env.kubectl("delete", obj["kind"], obj["metadata"]["name"], "--ignore-not-found")
    wait_for(lambda: not frozen_is_refused(env), TIMEOUT, message="the policy removed")

    try:
        again = migrate_to_v2(env)
        assert again.returncode == 0, again.stderr
        assert "storedVersions is [v2]" in again.stdout
        by_name = stored_versions_by_name(env.cp, env.namespace)
        assert by_name == dict.fromkeys(everything, V2.api_version)
        assert crd_status_versions(rest) == ["v2"]
        assert skip_mark(rest) is None
        moved = rest.request("GET", V1.object_path(env.namespace, stored_bad))
        assert moved["spec"]["schedule"] == BAD_SCHEDULE
    finally:
        migrate.migrate_storage(rest, "v1")  # as the session's other tests expect
    assert crd_status_versions(rest) == ["v1"]
