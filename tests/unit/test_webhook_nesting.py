"""The webhooks refuse objects nested deeper than ``nesting.MAX_DEPTH`` (issue 35, item 2),
naming the field, and the webhook code itself copes with any depth it is sent."""

from __future__ import annotations

from typing import Any

import pytest

from cronjob_operator.runtime.client import _json
from cronjob_operator.webhooks import configdeployment, conversion, cronjob, nesting
from tests.unit.test_webhooks import V1, a_config_deployment, a_cronjob, messages

POD_SPEC = ("spec", "jobTemplate", "spec", "template", "spec")
CRONJOB_AFFINITY = "spec.jobTemplate.spec.template.spec.affinity"


def with_affinity(levels: int) -> dict[str, Any]:
    """A CronJob whose pod template's ``affinity`` nests ``levels`` objects deep: the
    4.5 KB poison of issue 35 at 600."""
    obj = a_cronjob()
    affinity: dict[str, Any] = {}
    for _ in range(levels - 1):
        affinity = {"a": affinity}
    holder = obj
    for key in POD_SPEC:
        holder = holder[key]
    holder["affinity"] = affinity
    return obj


def depth_of(obj: dict[str, Any]) -> int:
    """The deepest level of ``obj`` (the root is level 1), from ``path_beyond``."""
    depth = 1
    while nesting.path_beyond(obj, depth) is not None:
        depth += 1
    return depth


def test_a_real_pod_template_is_far_inside_the_bound() -> None:
    assert depth_of(a_cronjob()) < nesting.MAX_DEPTH // 3
    assert depth_of(with_affinity(nesting.MAX_DEPTH - len(POD_SPEC) - 1)) == nesting.MAX_DEPTH


def test_a_cronjob_nested_600_deep_is_refused_naming_the_field() -> None:
    errors = cronjob.validate_create(with_affinity(600))  # admitted before
    assert messages(errors) == [
        f"{CRONJOB_AFFINITY}.a.a.a.a.a.a...: Invalid value: "
        f'"<nested more than {nesting.MAX_DEPTH} levels>": objects and lists may nest at most '
        f"{nesting.MAX_DEPTH} levels (a real pod template needs about 20); flatten or remove "
        "this field"
    ]


def test_the_bound_is_exact() -> None:
    at_bound = nesting.MAX_DEPTH - len(POD_SPEC) - 1  # affinity's levels that reach it
    assert cronjob.validate_create(with_affinity(at_bound)) == []
    assert len(cronjob.validate_create(with_affinity(at_bound + 1))) == 1


def test_an_object_already_too_deep_may_still_be_updated() -> None:
    old = with_affinity(600)
    assert cronjob.validate_update(with_affinity(600), old) == []
    assert len(cronjob.validate_update(with_affinity(600), a_cronjob())) == 1


def test_a_config_deployment_template_nested_600_deep_is_refused() -> None:
    template: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}]}
    for _ in range(600):
        template = {"spec": template}
    deep = a_config_deployment(template=template)
    [error] = configdeployment.validate_create(deep)
    assert str(error).startswith("spec.template.spec.spec.spec.spec.spec")
    assert configdeployment.validate_update(deep, deep) == []
    assert len(configdeployment.validate_update(deep, a_config_deployment())) == 1


@pytest.mark.parametrize("levels", [600, 5000])
def test_converting_and_defaulting_a_deep_cronjob_do_not_recurse(levels: int) -> None:
    deep = with_affinity(levels)  # copy.deepcopy raised RecursionError before
    template = _json.dumps(deep["spec"]["jobTemplate"])  # == on it would recurse itself
    v2 = conversion.convert(deep, "batch.tutorial.kubebuilder.io/v2")
    assert _json.dumps(conversion.convert(v2, V1)["spec"]["jobTemplate"]) == template
    assert _json.dumps(cronjob.default(deep)["spec"]["jobTemplate"]) == template


def with_managed_fields(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the ``metadata.managedFields`` the API server adds before admission:
    ``fieldsV1`` mirrors every field set four levels deeper than the field itself
    (``metadata.managedFields[0].fieldsV1.f:spec...``), and a leaf as an object (five)."""

    def mirrored(value: Any) -> Any:
        if isinstance(value, dict):
            return {f"f:{key}": mirrored(child) for key, child in value.items()}
        if isinstance(value, list):
            return {f"i:{index}": mirrored(item) for index, item in enumerate(value)}
        return {}

    fields = {"f:spec": mirrored(obj["spec"])}
    entry = {"manager": "kubectl", "operation": "Apply", "fieldsV1": fields}
    obj["metadata"]["managedFields"] = [entry]
    return obj


def test_the_bound_is_on_the_users_fields_not_on_managed_fields() -> None:
    """Issue 47: the API server's managedFields mirror the spec deeper than the spec; the
    bound measured them, so a CronJob of 60 levels was refused naming a field the user
    never wrote."""
    at_bound = nesting.MAX_DEPTH - len(POD_SPEC) - 1
    assert cronjob.validate_create(with_managed_fields(with_affinity(at_bound))) == []
    [error] = cronjob.validate_create(with_managed_fields(with_affinity(at_bound + 1)))
    assert str(error).startswith(f"{CRONJOB_AFFINITY}.a.a"), str(error)
    template: dict[str, Any] = {"containers": [{"name": "c", "image": "nginx"}]}
    for _ in range(nesting.MAX_DEPTH - 5):  # root, spec, and the three of containers
        template = {"spec": template}
    deep = a_config_deployment(template=template)
    assert depth_of(deep) == nesting.MAX_DEPTH
    assert configdeployment.validate_create(with_managed_fields(deep)) == []
