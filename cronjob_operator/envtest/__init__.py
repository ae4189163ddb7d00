"""A real local Kubernetes control plane for tests and for running the operator locally.

``ControlPlane`` starts etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok from binaries built by ``hack/build-binaries.sh`` (or found in
``$CRONJOB_OPERATOR_BIN_DIR``), so Jobs complete, garbage collection cascades and RBAC
is enforced as in a real cluster. ``wait_for`` is how tests wait for it to act.
``python -m cronjob_operator.envtest up|down|env|status`` (``hack/local-cluster.sh``)
manages a persistent plane for local use.

Test knobs: pods labelled ``FAIL_LABEL: "true"`` fail instead of succeeding; a Job's
pod stays Running for ``pod_run_seconds`` (``$CRONJOB_OPERATOR_POD_RUN_SECONDS``,
default ``DEFAULT_POD_RUN_SECONDS``), or for the Go duration in the pod annotation
``RUN_DURATION_ANNOTATION``.

``ControlPlane(real_node=True)`` adds a real kubelet node, ``REAL_NODE_NAME``, tainted
``REAL_NODE_TAINT`` (NoSchedule): a Pod that selects and tolerates it really runs
there, with ``hostNetwork`` (docs/deploy.md).
"""

from cronjob_operator.envtest._binaries import BIN_DIR_ENV, BinariesError, find_bin_dir
from cronjob_operator.envtest._components import Component
from cronjob_operator.envtest._node import NODE_NAME as REAL_NODE_NAME
from cronjob_operator.envtest._node import NODE_TAINT as REAL_NODE_TAINT
from cronjob_operator.envtest._stages import (
    DEFAULT_POD_RUN_SECONDS,
    FAIL_LABEL,
    POD_RUN_SECONDS_ENV,
    RUN_DURATION_ANNOTATION,
)
from cronjob_operator.envtest.controlplane import (
    KEEP_STATE_ENV,
    ComponentStatus,
    ControlPlane,
    ControlPlaneError,
)
from cronjob_operator.envtest.waiting import WaitTimeout, wait_for

__all__ = [
    "BIN_DIR_ENV",
    "DEFAULT_POD_RUN_SECONDS",
    "FAIL_LABEL",
    "KEEP_STATE_ENV",
    "POD_RUN_SECONDS_ENV",
    "REAL_NODE_NAME",
    "REAL_NODE_TAINT",
    "RUN_DURATION_ANNOTATION",
    "BinariesError",
    "Component",
    "ComponentStatus",
    "ControlPlane",
    "ControlPlaneError",
    "WaitTimeout",
    "find_bin_dir",
    "wait_for",
]
