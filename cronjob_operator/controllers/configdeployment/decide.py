"""The ConfigDeployment controller's decision, pure: desired Deployment, what changed, status.

``decide(view) -> Plan``: from what one reconcile read (``view.py``), whether to create,
update or keep the Deployment, with the event each write reports, or the problem that
stops it. Nothing here reads the clock or talks to the API server, so every rule is
unit-tested without a cluster; ``reconciler.py`` does the reads, writes and events
around it.

* The content hash (``sources.content_hash``: of the ConfigMap's and
  Secrets' content) goes, as a full hex digest, into the pod template annotation
  ``CONFIG_HASH_ANNOTATION``; ``status.configMapHash`` holds its first
  ``SHORT_HASH_LENGTH`` characters, because a printer column cannot truncate.
* ``desired_deployment`` is the Deployment the spec asks for: same name and namespace, a
  controller owner reference, a selector on ``SELECTOR_LABEL`` (also on the pods), the
  spec's replicas and pod template plus the hash annotation.
* ``needs_update`` compares only what we own, so the API server's defaulting (strategy,
  revisionHistoryLimit, terminationMessagePath, imagePullPolicy, ...) and its canonical
  form of quantities ("0.5" stored as "500m") never cause a write: the desired template
  must be *contained* in the live one (a zero value we set may be absent there), and the
  Deployment's ``SPEC_HASH_ANNOTATION`` (the hash of the replicas and template we last
  wrote) catches fields removed from the spec, which containment cannot see.
* ``update_status`` mirrors the Deployment (replicas, readyReplicas, rolled-out hash) and
  sets Available, Progressing and Degraded the standard way (``conditions``).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

from cronjob_operator.controllers.configdeployment.view import ConfigDeploymentView, MissingSource
from cronjob_operator.runtime import controllerutil, objects
from cronjob_operator.runtime.client import canonical_json
from cronjob_operator.runtime.controllerutil import condition_setter

__all__ = [
    "CONFIG_HASH_ANNOTATION",
    "DEFAULT_REPLICAS",
    "SELECTOR_LABEL",
    "SHORT_HASH_LENGTH",
    "SPEC_HASH_ANNOTATION",
    "Plan",
    "Problem",
    "Write",
    "decide",
    "desired_deployment",
    "desired_replicas",
    "needs_update",
    "rolled_out_hash",
    "short_hash",
    "update_status",
    "updated_deployment",
]

CONFIG_HASH_ANNOTATION = "apps.tutorial.kubebuilder.io/config-hash"
SPEC_HASH_ANNOTATION = "apps.tutorial.kubebuilder.io/spec-hash"
SELECTOR_LABEL = "apps.tutorial.kubebuilder.io/configdeployment"
SHORT_HASH_LENGTH = 10
DEFAULT_REPLICAS = 1

# Keys under which the API server stores resource quantities in canonical form.
_QUANTITY_KEYS = frozenset({"resources", "overhead", "sizeLimit"})
_QUANTITY = re.compile(
    r"^(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?\d+|n|u|m|k|M|G|T|P|E)?$"
)
_SUFFIXES = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    **{f"{prefix}i": Decimal(1024) ** (power + 1) for power, prefix in enumerate("KMGTPE")},
}
_ZERO_VALUES: tuple[object, ...] = (None, False, 0, "", {}, [], ())


@dataclass(frozen=True, slots=True)
class Problem:
    """Why the spec cannot be carried out: Degraded's reason and message."""

    reason: str
    message: str


def short_hash(full: str) -> str:
    """The form ``status.configMapHash`` and ``kubectl get`` show."""
    return full[:SHORT_HASH_LENGTH]


def _spec_hash(replicas: int, template: Mapping[str, Any]) -> str:
    return hashlib.sha256(canonical_json({"replicas": replicas, "template": template})).hexdigest()


def desired_replicas(config_deployment: objects.Obj) -> int:
    """``spec.replicas``, 1 when unset."""
    replicas = (config_deployment.get("spec") or {}).get("replicas")
    return DEFAULT_REPLICAS if replicas is None else int(replicas)


def desired_deployment(config_deployment: objects.Obj, content_hash: str) -> dict[str, Any]:
    """The Deployment that runs ``config_deployment``'s pods with ``content_hash`` rolled out."""
    metadata = config_deployment["metadata"]
    name = metadata["name"]
    selector = {SELECTOR_LABEL: name}
    template = objects.thaw((config_deployment.get("spec") or {}).get("template") or {})
    template_meta = template.setdefault("metadata", {})
    template_meta["labels"] = {**(template_meta.get("labels") or {}), **selector}
    template_meta["annotations"] = {
        **(template_meta.get("annotations") or {}),
        CONFIG_HASH_ANNOTATION: content_hash,
    }
    replicas = desired_replicas(config_deployment)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": dict(selector),
            "annotations": {SPEC_HASH_ANNOTATION: _spec_hash(replicas, template)},
            "ownerReferences": [controllerutil.controller_reference(config_deployment)],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(selector)},
            "template": template,
        },
    }


def rolled_out_hash(deployment: objects.Obj) -> str | None:
    """The config hash in the Deployment's pod template, if any."""
    template_meta = ((deployment.get("spec") or {}).get("template") or {}).get("metadata") or {}
    value = (template_meta.get("annotations") or {}).get(CONFIG_HASH_ANNOTATION)
    return str(value) if value else None


def _quantity(value: str) -> Decimal | None:
    match = _QUANTITY.match(value)
    if match is None:
        return None
    suffix = match["suffix"] or ""
    try:
        number = Decimal(match["number"])
        if suffix[:1] in {"e", "E"} and len(suffix) > 1:
            return number.scaleb(int(suffix[1:]))
        return number * _SUFFIXES[suffix]
    except (InvalidOperation, KeyError):
        return None


def _scalars_equal(want: object, have: object, *, quantities: bool) -> bool:
    if want == have:
        return True
    if quantities and isinstance(want, str) and isinstance(have, str):
        a, b = _quantity(want), _quantity(have)
        return a is not None and a == b
    return False


def _contained(want: object, have: object, *, quantities: bool = False) -> bool:
    """True when every field of ``want`` is in ``have`` with an equal value.

    Fields ``have`` has beyond ``want`` (server defaults) are ignored; a zero value in
    ``want`` matches an absent field (Go's ``omitempty`` drops it); lists match item by
    item; quantities (under resources, overhead, sizeLimit) match by value. Walked with a
    stack of its own: a free-form field (``affinity``) may nest deeper than Python's
    stack (a ConfigDeployment 2,000 deep raised RecursionError on every reconcile).
    """
    stack: list[tuple[object, object, bool]] = [(want, have, quantities)]
    while stack:
        want, have, quantities = stack.pop()
        if isinstance(want, Mapping):
            if not isinstance(have, Mapping):
                return False
            for key, value in want.items():
                if key in have:
                    stack.append((value, have[key], quantities or key in _QUANTITY_KEYS))
                elif not _is_zero(value):
                    return False
        elif isinstance(want, list | tuple):
            if not isinstance(have, list | tuple) or len(want) != len(have):
                return False
            stack.extend((w, h, quantities) for w, h in zip(want, have, strict=True))
        elif not _scalars_equal(want, have, quantities=quantities):
            return False
    return True


def _is_zero(value: object) -> bool:
    """Whether ``value`` is a zero value (compared without walking a structure)."""
    if isinstance(value, Mapping | list | tuple):
        return not value
    return value in _ZERO_VALUES


def needs_update(existing: objects.Obj, desired: Mapping[str, Any]) -> bool:
    """True when the live Deployment differs from ``desired`` in a field we own."""
    have_spec = existing.get("spec") or {}
    want_spec = desired["spec"]
    have_annotations = (existing.get("metadata") or {}).get("annotations") or {}
    want_annotations = desired["metadata"]["annotations"]
    return (
        have_annotations.get(SPEC_HASH_ANNOTATION) != want_annotations[SPEC_HASH_ANNOTATION]
        or have_spec.get("replicas") != want_spec["replicas"]
        or not _contained(want_spec["template"], have_spec.get("template") or {})
    )


def updated_deployment(existing: objects.Obj, desired: Mapping[str, Any]) -> dict[str, Any]:
    """``existing`` with our labels, annotations, replicas and template from ``desired``.

    Everything else (the immutable selector, strategy, other owners' labels, the
    resourceVersion that makes the update conditional) is kept as it is.
    """
    body: dict[str, Any] = objects.thaw(existing)
    metadata = body["metadata"]
    want = desired["metadata"]
    metadata["labels"] = {**(metadata.get("labels") or {}), **want["labels"]}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **want["annotations"]}
    body.setdefault("spec", {})
    body["spec"]["replicas"] = desired["spec"]["replicas"]
    body["spec"]["template"] = objects.thaw(desired["spec"]["template"])
    body.pop("status", None)
    return body


def _deployment_condition(deployment: objects.Obj, type_: str) -> Mapping[str, Any] | None:
    for condition in (deployment.get("status") or {}).get("conditions") or ():
        if condition.get("type") == type_:
            return condition  # type: ignore[no-any-return]
    return None


def _rollout_progress(deployment: objects.Obj) -> tuple[bool, str]:
    """Whether the rollout is still going, and a message: ``kubectl rollout status``'s test."""
    status = deployment.get("status") or {}
    metadata = deployment.get("metadata") or {}
    want = int((deployment.get("spec") or {}).get("replicas", DEFAULT_REPLICAS) or 0)
    updated = int(status.get("updatedReplicas") or 0)
    total = int(status.get("replicas") or 0)
    available = int(status.get("availableReplicas") or 0)
    if int(status.get("observedGeneration") or 0) < int(metadata.get("generation") or 0):
        return True, "waiting for the Deployment controller to observe the new spec"
    if updated < want:
        return True, f"{updated} of {want} pods updated"
    if total > updated:
        return True, f"{total - updated} old pods pending termination"
    if available < updated:
        return True, f"{available} of {updated} updated pods available"
    return False, f"{updated} of {want} pods updated and available"


def update_status(
    status: dict[str, Any],
    *,
    generation: int,
    deployment: objects.Obj | None,
    problem: Problem | None,
    now: datetime,
) -> None:
    """Set ``status`` in place from the Deployment we manage (None: none of ours exists)."""
    condition = condition_setter(status, generation=generation, now=now)

    status["observedGeneration"] = generation
    if deployment is None:
        status["replicas"] = 0
        status["readyReplicas"] = 0
        status.pop("configMapHash", None)
        reason, message = (
            (problem.reason, problem.message) if problem else ("NoDeployment", "no Deployment")
        )
        condition("Available", False, reason, message)
        condition("Progressing", False, reason, message)
        condition("Degraded", problem is not None, reason if problem else "AsExpected", message)
        return
    dep_status = deployment.get("status") or {}
    want = int((deployment.get("spec") or {}).get("replicas", DEFAULT_REPLICAS) or 0)
    ready = int(dep_status.get("readyReplicas") or 0)
    status["replicas"] = int(dep_status.get("replicas") or 0)
    status["readyReplicas"] = ready
    rolled_out = rolled_out_hash(deployment)
    if rolled_out:
        status["configMapHash"] = short_hash(rolled_out)
    else:
        status.pop("configMapHash", None)

    readiness = f"{ready} of {want} pods ready"
    available = _deployment_condition(deployment, "Available")
    if available is not None:
        condition(
            "Available",
            available.get("status") == "True",
            str(available.get("reason") or "Deployment"),
            readiness,
        )
    else:
        condition("Available", ready >= want, "ReadyReplicas", readiness)

    progressing = _deployment_condition(deployment, "Progressing") or {}
    stalled = progressing.get("status") == "False" and (
        progressing.get("reason") == "ProgressDeadlineExceeded"
    )
    if stalled:
        message = str(progressing.get("message") or "the rollout exceeded its progress deadline")
        condition("Progressing", False, "ProgressDeadlineExceeded", message)
    else:
        rolling, message = _rollout_progress(deployment)
        condition("Progressing", rolling, "RollingOut" if rolling else "RolloutComplete", message)

    if problem is not None:
        condition("Degraded", True, problem.reason, problem.message)
    elif stalled:
        condition(
            "Degraded",
            True,
            "ProgressDeadlineExceeded",
            f"Deployment {objects.name_of(deployment)}: {message}",
        )
    else:
        condition("Degraded", False, "AsExpected", "")


@dataclass(frozen=True, slots=True)
class Write:
    """A Deployment write and the Normal event that reports it once it succeeded."""

    verb: Literal["create", "update"]
    deployment: dict[str, Any]
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class Plan:
    """What one reconcile does to the Deployment, and what its status reports.

    ``deployment`` is the Deployment the status reports unless ``write`` succeeds (then
    the written one does); ``problem`` is reported as a Warning event and in Degraded.
    """

    deployment: objects.Obj | None
    write: Write | None = None
    problem: Problem | None = None


def _not_owned(config_deployment: objects.Obj) -> Problem:
    metadata = config_deployment["metadata"]
    return Problem(
        "DeploymentNotOwned",
        f"Deployment {metadata['namespace']}/{metadata['name']} exists and is not "
        "controlled by this ConfigDeployment; not touching it. Delete or rename it, "
        "or rename the ConfigDeployment",
    )


def _sources_missing(missing: tuple[MissingSource, ...], existing: objects.Obj | None) -> Problem:
    kept = (
        f"; Deployment {objects.name_of(existing)} keeps running with config hash "
        f"{short_hash(rolled_out_hash(existing) or '') or '<none>'}"
        if existing is not None
        else ""
    )
    return Problem(missing[0].reason, "; ".join(source.message for source in missing) + kept)


def _update(existing: objects.Obj, desired: dict[str, Any]) -> Write:
    name = desired["metadata"]["name"]
    old_hash = rolled_out_hash(existing) or ""
    new_hash = rolled_out_hash(desired) or ""
    if old_hash != new_hash:
        reason, message = (
            "RolledOut",
            f"Rolling out Deployment {name}: config hash "
            f"{short_hash(old_hash) or '<none>'} -> {short_hash(new_hash)}",
        )
    else:
        reason, message = "DeploymentUpdated", f"Updated Deployment {name}"
    return Write("update", updated_deployment(existing, desired), reason, message)


def decide(view: ConfigDeploymentView) -> Plan:
    """The Plan for ``view``: create, update or keep the Deployment, or report a problem.

    A Deployment another owner controls is never touched; while a named source is missing
    the existing Deployment is left as it is; otherwise the Deployment is created, or
    updated when it differs from the desired one on what we own (``needs_update``).
    """
    if not view.owned:
        return Plan(None, problem=_not_owned(view.config_deployment))
    if view.content_hash is None:
        return Plan(view.existing, problem=_sources_missing(view.missing, view.existing))
    desired = desired_deployment(view.config_deployment, view.content_hash)
    if view.existing is None:
        name = desired["metadata"]["name"]
        rolled_out = short_hash(rolled_out_hash(desired) or "")
        message = f"Created Deployment {name} with config hash {rolled_out}"
        return Plan(None, write=Write("create", desired, "DeploymentCreated", message))
    if not needs_update(view.existing, desired):
        return Plan(view.existing)
    return Plan(view.existing, write=_update(view.existing, desired))
