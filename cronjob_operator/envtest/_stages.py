"""kwok's stage configuration: how fake nodes and pods move through their lifecycle.

kwok v0.8.0 ships no default stages, so the harness writes one multi-document YAML for
``kwok --config``. Node stages (initialize, heartbeat with lease) and pod-ready come
unchanged from kwok's own ``kustomize/stage`` files, copied next to the binaries by
``hack/build-binaries.sh``. The terminal pod stages are ours, because tests need to
control them:

* ``pod-complete``: a Job's running pod succeeds after the *run duration*, by default
  ``DEFAULT_POD_RUN_SECONDS`` (long enough to observe an active Job), overridden per
  plane by the constructor or ``$CRONJOB_OPERATOR_POD_RUN_SECONDS``, and per pod by the
  annotation ``cronjob-operator.test/run-duration`` (a Go duration such as ``"30s"``).
* ``pod-fail``: a running pod labelled ``cronjob-operator.test/fail: "true"`` fails
  with exit code 1 after the same run duration; ``pod-complete`` excludes such pods.
* ``pod-terminate`` and ``pod-delete`` act as a kubelet does on deletion: the pod first
  becomes Failed (exit code 143), then is deleted, so the Job controller can account for
  it and drop its tracking finalizer.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

FAIL_LABEL = "cronjob-operator.test/fail"
RUN_DURATION_ANNOTATION = "cronjob-operator.test/run-duration"
POD_RUN_SECONDS_ENV = "CRONJOB_OPERATOR_POD_RUN_SECONDS"
DEFAULT_POD_RUN_SECONDS = 3.0

UPSTREAM_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
)

NOT_DELETED = {"key": ".metadata.deletionTimestamp", "operator": "DoesNotExist"}
DELETED = {"key": ".metadata.deletionTimestamp", "operator": "Exists"}
FAIL_LABEL_KEY = f'.metadata.labels["{FAIL_LABEL}"]'
# A Go template rendered by kwok; the %(...)s fields are filled in by Python first.
TERMINATED_STATUS = """\
{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: PodScheduled
- lastTransitionTime: {{ $now | Quote }}
  reason: %(ready_reason)s
  status: "False"
  type: Ready
- lastTransitionTime: {{ $now | Quote }}
  reason: %(ready_reason)s
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range .spec.containers }}
- image: {{ .image | Quote }}
  name: {{ .name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: %(exit_code)d
      finishedAt: {{ $now | Quote }}
      reason: %(reason)s
{{ end }}
phase: %(phase)s
"""


def pod_run_seconds_from_env() -> float:
    """The run duration from ``$CRONJOB_OPERATOR_POD_RUN_SECONDS``, else the default."""
    value = os.environ.get(POD_RUN_SECONDS_ENV)
    if not value:
        return DEFAULT_POD_RUN_SECONDS
    try:
        return float(value)
    except ValueError:
        raise ValueError(f"${POD_RUN_SECONDS_ENV}={value!r} is not a number of seconds") from None


def write_kwok_config(stages_dir: Path, path: Path, *, pod_run_seconds: float) -> None:
    """Write every stage kwok needs into ``path`` as one multi-document YAML file."""
    documents: list[dict[str, Any]] = []
    for relative in UPSTREAM_STAGES:
        source = stages_dir / relative
        if not source.is_file():
            raise FileNotFoundError(f"kwok stage {source} is missing; rerun hack/build-binaries.sh")
        documents.extend(d for d in yaml.safe_load_all(source.read_text()) if d)
    run_ms = round(pod_run_seconds * 1000)
    documents += [
        _stage(
            "pod-complete",
            selector=[
                NOT_DELETED,
                _phase_in("Running"),
                {"key": ".metadata.ownerReferences.[].kind", "operator": "In", "values": ["Job"]},
                {"key": FAIL_LABEL_KEY, "operator": "NotIn", "values": ["true"]},
            ],
            delay_ms=run_ms,
            status=_terminated_status("Succeeded", exit_code=0, reason="Completed"),
        ),
        _stage(
            "pod-fail",
            selector=[
                NOT_DELETED,
                _phase_in("Running"),
                {"key": FAIL_LABEL_KEY, "operator": "In", "values": ["true"]},
            ],
            delay_ms=run_ms,
            status=_terminated_status("Failed", exit_code=1, reason="Error"),
        ),
        _stage(
            "pod-terminate",
            selector=[DELETED, _phase_in("Pending", "Running")],
            delay_ms=None,
            status=_terminated_status("Failed", exit_code=143, reason="Error"),
        ),
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Stage",
            "metadata": {"name": "pod-delete"},
            "spec": {
                "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
                "selector": {"matchExpressions": [DELETED, _phase_in("Succeeded", "Failed")]},
                "next": {"delete": True},
            },
        },
    ]
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))


def _phase_in(*phases: str) -> dict[str, Any]:
    return {"key": ".status.phase", "operator": "In", "values": list(phases)}


def _stage(
    name: str, *, selector: list[dict[str, Any]], delay_ms: int | None, status: str
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "resourceRef": {"apiGroup": "v1", "kind": "Pod"},
        "selector": {"matchExpressions": selector},
    }
    if delay_ms is not None:
        spec["delay"] = {
            "durationMilliseconds": delay_ms,
            "durationFrom": {
                "expressionFrom": f'.metadata.annotations["{RUN_DURATION_ANNOTATION}"]'
            },
        }
    spec["next"] = {"statusTemplate": status}
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "Stage",
        "metadata": {"name": name},
        "spec": spec,
    }


def _terminated_status(phase: str, *, exit_code: int, reason: str) -> str:
    """A kwok status template: every container terminated, the pod in ``phase``."""
    ready_reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    return TERMINATED_STATUS % {
        "phase": phase,
        "exit_code": exit_code,
        "reason": reason,
        "ready_reason": ready_reason,
    }
