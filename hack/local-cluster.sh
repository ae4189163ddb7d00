#!/usr/bin/env bash
# A persistent local Kubernetes control plane (etcd, kube-apiserver, controller manager,
# scheduler, kwok with one fake node) for running and poking at the operator by hand.
#
#   eval "$(hack/local-cluster.sh up)"   start it (or reuse a running one); sets
#                                        KUBECONFIG and puts kubectl on PATH
#   hack/local-cluster.sh env            print those export lines again
#   hack/local-cluster.sh status         components, pids, ports and log files
#   hack/local-cluster.sh down           stop everything and remove the state
#   hack/local-cluster.sh import-image A  load an image archive into the real node
#
# The processes outlive this script; state and logs live in
# ${XDG_CACHE_HOME:-~/.cache}/cronjob-operator/cluster. Extra arguments go to
# `python -m cronjob_operator.envtest <command>` (e.g. `up --pod-run-seconds 10`).
# `up --real-node` adds a real kubelet node (hack/build-node.sh builds it) that runs
# images imported into it (`up --pod-network`: with a Pod network); see docs/deploy.md.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() { sed -n '2,17s/^# \{0,1\}//p' "${BASH_SOURCE[0]}" >&2; exit 2; }

main() {
  local command="${1:-}"
  [[ $# -gt 0 ]] && shift
  case "${command}" in
    up)
      ensure_venv
      local bins
      bins="$(bin_dir)"
      exec "${VENV}/bin/python" -m cronjob_operator.envtest up --bin-dir "${bins}" "$@"
      ;;
    down | env | status | import-image)
      ensure_venv
      exec "${VENV}/bin/python" -m cronjob_operator.envtest "${command}" "$@"
      ;;
    *) usage ;;
  esac
}

main "$@"
