#!/usr/bin/env bash
# The README's first command: run the operator on a local control plane with the samples.
#
# Creates .venv if needed, brings up the local cluster (reusing a running one), installs
# the CRDs, starts the operator in the foreground with readable logs, applies the
# samples once it is ready, and prints the kubectl commands to watch what happens.
# Ctrl-C stops the operator; the cluster stays up until `hack/local-cluster.sh down`.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PROBE_PORT="${CRONJOB_OPERATOR_PROBE_PORT:-8081}"
METRICS_PORT="${CRONJOB_OPERATOR_METRICS_PORT:-8080}"

# cluster_up: start (or reuse) the local cluster and export KUBECONFIG and PATH.
cluster_up() {
  local exports
  exports="$("${REPO_ROOT}/hack/local-cluster.sh" up)"
  eval "${exports}"
  CLUSTER_EXPORTS="${exports}"
}

install_crds() {
  log "installing the CRDs (kubectl apply -k config/crd)"
  kubectl apply -k "${REPO_ROOT}/config/crd" >&2
  # A CRD just created has no status yet, and kubectl wait fails on that: retry.
  local deadline=$((SECONDS + 60))
  until kubectl wait --for=condition=Established --timeout=10s \
      crd/cronjobs.batch.tutorial.kubebuilder.io \
      crd/configdeployments.apps.tutorial.kubebuilder.io \
      crd/concurrencygroups.batch.tutorial.kubebuilder.io >&2 2>/dev/null; do
    ((SECONDS < deadline)) || { log "the CRDs were not established within 60s"; exit 1; }
    sleep 1
  done
}

start_operator() {
  log "starting the operator (Ctrl-C stops it; the cluster stays up)"
  "${VENV}/bin/cronjob-operator" run \
    --kubeconfig "${KUBECONFIG}" \
    --health-probe-bind-address "127.0.0.1:${PROBE_PORT}" \
    --metrics-bind-address "127.0.0.1:${METRICS_PORT}" --no-metrics-secure \
    --webhook-port 0 \
    --log-format text &
  OPERATOR_PID=$!
  trap 'kill -TERM "${OPERATOR_PID}" 2>/dev/null || true' INT TERM
}

wait_ready() {
  local deadline=$((SECONDS + 120))
  until curl -fsS "http://127.0.0.1:${PROBE_PORT}/readyz" >/dev/null 2>&1; do
    if ! kill -0 "${OPERATOR_PID}" 2>/dev/null; then
      log "the operator exited before it was ready"; exit 1
    fi
    ((SECONDS < deadline)) || { log "the operator was not ready within 120s"; exit 1; }
    sleep 0.5
  done
}

apply_samples() {
  log "applying the samples (kubectl apply -k config/samples)"
  kubectl apply -k "${REPO_ROOT}/config/samples" >&2
}

print_usage() {
  cat >&2 <<USAGE

The operator runs against the local cluster. In another shell:

  eval "\$(hack/local-cluster.sh env)"
  kubectl get cronjobs.batch.tutorial.kubebuilder.io -w      # a Job every minute
  kubectl get jobs -w
  kubectl describe cronjobs.batch.tutorial.kubebuilder.io cronjob-sample   # status, events
  kubectl get events --sort-by=.lastTimestamp
  kubectl get configdeployments,deployments,replicasets
  kubectl patch configmap configdeployment-sample-config --type=merge \\
      -p '{"data":{"greeting":"hello again"}}'                # rolls the Deployment
  curl -s http://127.0.0.1:${METRICS_PORT}/metrics | grep -E '^(controller_runtime|cronjob_controller)'

which needs:
${CLUSTER_EXPORTS}

  hack/local-cluster.sh status    components, pids, ports, logs
  hack/local-cluster.sh down      stop the cluster and remove its state
USAGE
}

main() {
  ensure_venv
  cluster_up
  install_crds
  start_operator
  wait_ready
  apply_samples
  print_usage
  wait "${OPERATOR_PID}" || true
  trap - INT TERM
  log "operator stopped; the cluster is still up (hack/local-cluster.sh down stops it)"
}

main "$@"
