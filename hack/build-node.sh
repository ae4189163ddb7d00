#!/usr/bin/env bash
# Build (or reuse) what a real node of the local control plane runs, and print the
# directory that holds it: kubelet (from the pinned k8s.io/kubernetes module, the same
# throwaway-module build as hack/build-binaries.sh, sharing its Go build cache),
# containerd, containerd-shim-runc-v2 and ctr (from containerd's Go module, no cgo),
# and pause.tar, a tiny static pause image for the Pod sandboxes. Installs Debian's runc
# and CNI plugins (only loopback is used) and buildah when missing.
#
# The cache lives outside the repo, keyed on the pinned versions and the Go version:
#   ${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/cronjob-operator}/bin/node_<key>/
# A lock serialises concurrent builds of the node.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
# shellcheck source=versions.env
source "${REPO_ROOT}/hack/versions.env"

command -v go >/dev/null || { log "the Go toolchain is required (go on PATH)"; exit 1; }
GO_VERSION="$(go env GOVERSION)"
CACHE_ROOT="$(cache_root)"
KEY="node_k8s-${KUBERNETES_VERSION}_containerd-${CONTAINERD_VERSION}_${GO_VERSION}"
OUT="${CACHE_ROOT}/bin/${KEY}"
WORK="${CACHE_ROOT}/build/${KEY}"
JOBS="${CRONJOB_OPERATOR_BUILD_JOBS:-$(nproc)}"
# The name containerd is told to use for sandboxes (pinned, so never pulled or collected).
PAUSE_IMAGE="registry.k8s.io/pause:3.10.1"

# verify NAME: true when $OUT/NAME exists and reports the pinned version.
verify() {
  local bin="${OUT}/$1" out want
  [[ -x "${bin}" ]] || return 1
  case "$1" in
    kubelet) want="Kubernetes ${KUBERNETES_VERSION}"; out="$("${bin}" --version 2>/dev/null)" ;;
    containerd) want="${CONTAINERD_VERSION}"; out="$("${bin}" --version 2>/dev/null)" ;;
    ctr) want="${CONTAINERD_VERSION}"; out="$("${bin}" --version 2>/dev/null)" ;;
    *) return 0 ;;
  esac || return 1
  [[ "${out}" == *"${want}"* ]]
}

build_kubelet() {
  local dir="${WORK}/kubernetes"
  write_kubernetes_module "${dir}" local/kubeletbuild
  (
    cd "${dir}"
    log "building kubelet ${KUBERNETES_VERSION}"
    go get "k8s.io/kubernetes/cmd/kubelet@${KUBERNETES_VERSION}" >&2
    CGO_ENABLED=0 go build -p "${JOBS}" -trimpath -tags selinux,notest \
      -ldflags "-s -w$(kubernetes_ldflags)" -o "${OUT}/kubelet" k8s.io/kubernetes/cmd/kubelet >&2
  )
}

build_containerd() {
  local module=github.com/containerd/containerd/v2
  log "building containerd ${CONTAINERD_VERSION} (containerd, containerd-shim-runc-v2, ctr)"
  CGO_ENABLED=0 GOBIN="${OUT}" go install -p "${JOBS}" -trimpath \
    -ldflags "-s -w -X ${module}/version.Version=${CONTAINERD_VERSION}" \
    "${module}/cmd/containerd@${CONTAINERD_VERSION}" \
    "${module}/cmd/containerd-shim-runc-v2@${CONTAINERD_VERSION}" \
    "${module}/cmd/ctr@${CONTAINERD_VERSION}" >&2
}

# build_pause_image: a sandbox image holding one static program that sleeps until
# SIGTERM, saved as a docker-archive named $PAUSE_IMAGE.
build_pause_image() {
  local dir="${WORK}/pause" container
  mkdir -p "${dir}"
  cat > "${dir}/main.go" <<'GO'
// Command pause holds a Pod sandbox's namespaces until it is told to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
GO
  printf 'module local/pause\n\ngo 1.24\n' > "${dir}/go.mod"
  (cd "${dir}" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "${dir}/pause" .) >&2
  container="$(buildah from scratch)"
  buildah copy --quiet "${container}" "${dir}/pause" /pause >/dev/null
  buildah config --entrypoint '["/pause"]' --user 65535:65535 "${container}"
  buildah commit --quiet --rm "${container}" "${PAUSE_IMAGE}" >/dev/null
  rm -f "${OUT}/pause.tar"
  buildah push --quiet "${PAUSE_IMAGE}" "docker-archive:${OUT}/pause.tar.partial:${PAUSE_IMAGE}" >/dev/null
  mv "${OUT}/pause.tar.partial" "${OUT}/pause.tar"
  echo "${PAUSE_IMAGE}" > "${OUT}/pause.image"
}

main() {
  ensure_commands runc=runc buildah=buildah
  [[ -x /usr/lib/cni/loopback ]] || ensure_commands __cni_loopback__=containernetworking-plugins
  mkdir -p "${OUT}" "${WORK}"
  exec 9>"${CACHE_ROOT}/node-build.lock"
  flock 9
  verify kubelet || build_kubelet
  { verify containerd && verify ctr && [[ -x "${OUT}/containerd-shim-runc-v2" ]]; } || build_containerd
  [[ -s "${OUT}/pause.tar" && -s "${OUT}/pause.image" ]] || build_pause_image
  local name
  for name in kubelet containerd ctr; do
    verify "${name}" || { log "${OUT}/${name} does not report the pinned version"; exit 1; }
  done
  flock -u 9
  echo "${OUT}"
}

main
