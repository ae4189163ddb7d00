#!/usr/bin/env bash
# Build (or reuse) the tools the chart and observability tests drive, from Go modules,
# and print the directory that holds them: helm (helm.sh/helm/v4), prometheus and
# promtool (github.com/prometheus/prometheus, without the web UI's assets: the tests use
# the HTTP API only).
#
# The cache is a sibling of the control plane's (hack/build-binaries.sh), keyed on these
# tools' own versions and the Go version, so bumping one never rebuilds Kubernetes:
#   ${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/cronjob-operator}/bin/<key>/
# A lock of its own serialises concurrent builds.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"

log() { echo "build-tools: $*" >&2; }

command -v go >/dev/null || { log "the Go toolchain is required (go on PATH)"; exit 1; }
GO_VERSION="$(go env GOVERSION)"
CACHE_ROOT="${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronjob-operator}"
# v0.3MM.P is Prometheus 3.MM.P: the version the binaries report.
PROM_MINOR_PATCH="${PROMETHEUS_MODULE_VERSION#v0.3}"
PROMETHEUS_VERSION="3.$((10#${PROM_MINOR_PATCH%%.*})).${PROM_MINOR_PATCH#*.}"
KEY="tools_helm-${HELM_VERSION}_prometheus-${PROMETHEUS_MODULE_VERSION}_${GO_VERSION}"
OUT="${CACHE_ROOT}/bin/${KEY}"
JOBS="${CRONJOB_OPERATOR_BUILD_JOBS:-$(nproc)}"
mkdir -p "${OUT}"

# verify NAME: true when $OUT/NAME exists and reports the pinned version (output captured
# before matching, as in build-binaries.sh, so SIGPIPE never decides the answer).
verify() {
  local bin="${OUT}/$1" out want
  [[ -x "${bin}" ]] || return 1
  case "$1" in
    helm) want="${HELM_VERSION}"; out="$("${bin}" version --template '{{.Version}}' 2>/dev/null)" ;;
    *) want="version ${PROMETHEUS_VERSION} "; out="$("${bin}" --version 2>&1)" ;;
  esac || return 1
  [[ "${out}" == *"${want}"* ]]
}

build_helm() {
  log "building helm ${HELM_VERSION}"
  CGO_ENABLED=0 GOBIN="${OUT}" go install -p "${JOBS}" -trimpath \
    -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=${HELM_VERSION}" \
    "helm.sh/helm/v4/cmd/helm@${HELM_VERSION}" >&2
}

build_prometheus() {
  local p=github.com/prometheus/common/version
  log "building prometheus and promtool ${PROMETHEUS_VERSION} (module ${PROMETHEUS_MODULE_VERSION})"
  CGO_ENABLED=0 GOBIN="${OUT}" go install -p "${JOBS}" -trimpath -tags netgo \
    -ldflags "-s -w -X ${p}.Version=${PROMETHEUS_VERSION} -X ${p}.Branch=HEAD -X ${p}.Revision=${PROMETHEUS_MODULE_VERSION}" \
    "github.com/prometheus/prometheus/cmd/prometheus@${PROMETHEUS_MODULE_VERSION}" \
    "github.com/prometheus/prometheus/cmd/promtool@${PROMETHEUS_MODULE_VERSION}" >&2
}

main() {
  exec 9>"${CACHE_ROOT}/tools.lock"
  flock 9
  verify helm || build_helm
  { verify prometheus && verify promtool; } || build_prometheus
  local name
  for name in helm prometheus promtool; do
    verify "${name}" || { log "${OUT}/${name} does not report the pinned version"; exit 1; }
  done
  echo "${OUT}"
}

main
