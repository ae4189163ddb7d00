#!/usr/bin/env bash
# Build (or reuse) the local control plane's binaries from Go modules and print the
# directory that holds them: etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, plus kwok's stage files under stages/. It then builds
# (or reuses) helm, prometheus and promtool with hack/build-tools.sh, which caches them
# under their own key and prints their own directory.
#
# The cache lives outside the repo, keyed on the pinned versions and the Go version:
#   ${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/cronjob-operator}/bin/<key>/
# Prebuilt binaries in $CRONJOB_OPERATOR_K8S_BIN are used instead when present (only
# the missing ones are built). A lock per cache key serialises concurrent builds of the
# same versions; builds of different versions run side by side.
#
# --compat builds the oldest supported release instead (COMPAT_KUBERNETES_VERSION and
# COMPAT_ETCD_VERSION in versions.env): the same control plane (the controllers'
# integration tests need kube-controller-manager, kube-scheduler and kwok's nodes) but
# not the tools, which only the default release's tests use.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${HACK_DIR}/lib.sh"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"

WITH_TOOLS=1
case "${1:-}" in
  "") ;;
  --compat)
    KUBERNETES_VERSION="${COMPAT_KUBERNETES_VERSION}"
    ETCD_VERSION="${COMPAT_ETCD_VERSION}"
    WITH_TOOLS=0
    ;;
  *) echo "usage: $0 [--compat]" >&2; exit 2 ;;
esac

log() { echo "build-binaries: $*" >&2; }

command -v go >/dev/null || { log "the Go toolchain is required (go on PATH)"; exit 1; }
GO_VERSION="$(go env GOVERSION)"
CACHE_ROOT="${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronjob-operator}"
KEY="k8s-${KUBERNETES_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}_${GO_VERSION}"
OUT="${CACHE_ROOT}/bin/${KEY}"
WORK="${CACHE_ROOT}/build/${KEY}"
mkdir -p "${OUT}" "${WORK}"

JOBS="${CRONJOB_OPERATOR_BUILD_JOBS:-$(nproc)}"

# verify NAME: true when $OUT/NAME exists and reports the pinned version. The output is
# captured before matching: `cmd | grep -q` under pipefail fails at random when grep exits
# first and cmd dies of SIGPIPE.
verify() {
  local name="$1" bin="${OUT}/$1" out want
  [[ -x "${bin}" ]] || return 1
  case "${name}" in
    etcd) want="etcd Version: ${ETCD_VERSION#v}"; out="$("${bin}" --version 2>/dev/null)" ;;
    kwok) want="${KWOK_VERSION}"; out="$("${bin}" --version 2>/dev/null)" ;;
    kubectl) want="${KUBERNETES_VERSION}"; out="$("${bin}" version --client 2>/dev/null)" ;;
    *) want="${KUBERNETES_VERSION}"; out="$("${bin}" --version 2>/dev/null)" ;;
  esac || return 1
  [[ "${out}" == *"${want}"* ]]
}

# adopt_prebuilt NAME: copy NAME from $CRONJOB_OPERATOR_K8S_BIN when it is there and
# reports the pinned version (a directory of another release's binaries is skipped).
adopt_prebuilt() {
  local src="${CRONJOB_OPERATOR_K8S_BIN:-}/$1"
  [[ -n "${CRONJOB_OPERATOR_K8S_BIN:-}" && -x "${src}" ]] || return 1
  cp "${src}" "${OUT}/$1"
  verify "$1" || { rm -f "${OUT}/$1"; return 1; }
  log "using prebuilt ${src}"
}

build_kubernetes() {
  local dir="${WORK}/kubernetes"
  write_kubernetes_module "${dir}" local/k8sbuild
  local pkgs=() name
  for name in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/${name}"); done
  (
    cd "${dir}"
    log "resolving k8s.io/kubernetes ${KUBERNETES_VERSION} modules"
    go get "${pkgs[@]/%/@${KUBERNETES_VERSION}}" >&2
    log "building $* (cold builds take tens of minutes)"
    CGO_ENABLED=0 go build -p "${JOBS}" -trimpath -tags selinux,notest -ldflags "-s -w$(kubernetes_ldflags)" -o "${OUT}/" "${pkgs[@]}" >&2
  )
}

build_etcd() {
  local dir="${WORK}/etcd"
  mkdir -p "${dir}"
  cat > "${dir}/main.go" <<'GO'
// Command etcd is etcd's own main (etcdmain.Main), built from the pinned server module.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  printf 'module local/etcdbuild\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "${ETCD_VERSION}" > "${dir}/go.mod"
  (
    cd "${dir}"
    log "building etcd ${ETCD_VERSION}"
    go mod tidy >&2
    CGO_ENABLED=0 go build -p "${JOBS}" -trimpath -ldflags "-s -w" -o "${OUT}/etcd" . >&2
  )
}

build_kwok() {
  log "building kwok ${KWOK_VERSION}"
  CGO_ENABLED=0 GOBIN="${OUT}" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION}" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}" >&2
}

copy_kwok_stages() {
  local dir
  dir="$(go mod download -json "sigs.k8s.io/kwok@${KWOK_VERSION}" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
  mkdir -p "${OUT}/stages"
  cp -r "${dir}/kustomize/stage/." "${OUT}/stages/"
  chmod -R u+w "${OUT}/stages"
}

main() {
  exec 9>"${CACHE_ROOT}/build-${KEY}.lock"
  flock 9
  local k8s_missing=() name
  for name in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
    verify "${name}" || adopt_prebuilt "${name}" || k8s_missing+=("${name}")
  done
  ((${#k8s_missing[@]} == 0)) || build_kubernetes "${k8s_missing[@]}"
  verify etcd || adopt_prebuilt etcd || build_etcd
  verify kwok || adopt_prebuilt kwok || build_kwok
  [[ -d "${OUT}/stages" ]] || copy_kwok_stages
  for name in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl kwok; do
    verify "${name}" || { log "${OUT}/${name} does not report the pinned version"; exit 1; }
  done
  flock -u 9
  ((WITH_TOOLS == 0)) || "${HACK_DIR}/build-tools.sh" >/dev/null
  echo "${OUT}"
}

main
