#!/usr/bin/env bash
# Build (or reuse) the Go side of bench/fire.py: kubebuilder's CronJob tutorial controller
# (controller-runtime), and print the directory that holds its `manager` binary and its
# CRD (batch.tutorial.kubebuilder.io_cronjobs.yaml).
#
# The tutorial is the nested Go module `<book>/cronjob-tutorial/testdata/project` of the
# kubebuilder repository (TUTORIAL_DIR below). Go module zips leave nested modules out, so
# `sigs.k8s.io/kubebuilder/v4`'s zip from the module proxy does not hold it: the source is
# an archive that `git archive` made of that directory at KUBEBUILDER_TUTORIAL_COMMIT
# (hack/versions.env), given as $CRONJOB_OPERATOR_GO_TUTORIAL_SRC (.tar or .tar.gz; the
# recipe is in docs/performance.md). The archive's commit id (`git get-tar-commit-id`)
# must be the pinned one. Its Go dependencies come from the module proxy.
#
# The cache lives outside the repo, keyed on the commit and the Go version:
#   ${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-~/.cache}/cronjob-operator}/go-tutorial/<key>/
# --cached prints that directory only when it is already built (bench/fire.py asks so,
# and never builds). Exit 2: no usable source (or, with --cached, nothing built yet),
# said in one line on stderr.
set -euo pipefail

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "${HACK_DIR}/lib.sh"
# shellcheck source=versions.env
source "${HACK_DIR}/versions.env"

log() { echo "build-go-tutorial: $*" >&2; }

CACHED_ONLY=0
case "${1:-}" in
  "") ;;
  --cached) CACHED_ONLY=1 ;;
  *) echo "usage: $0 [--cached]" >&2; exit 2 ;;
esac

TUTORIAL_DIR=cronjob-tutorial/testdata/project
CRD=batch.tutorial.kubebuilder.io_cronjobs.yaml
command -v go >/dev/null || { log "the Go toolchain is required (go on PATH)"; exit 2; }
GO_VERSION="$(go env GOVERSION)"
KEY="kubebuilder-${KUBEBUILDER_TUTORIAL_COMMIT:0:12}_${GO_VERSION}"
OUT="$(cache_root)/go-tutorial/${KEY}"

built() { [[ -x "${OUT}/manager" && -f "${OUT}/${CRD}" ]]; }

# source_commit ARCHIVE: the commit id `git archive` wrote into ARCHIVE (empty if none).
source_commit() { gzip -dcf "$1" | git get-tar-commit-id 2>/dev/null || true; }

build() {
  local src="${CRONJOB_OPERATOR_GO_TUTORIAL_SRC:-}" work commit
  if [[ -z "${src}" || ! -f "${src}" ]]; then
    log "no source: set CRONJOB_OPERATOR_GO_TUTORIAL_SRC to a git archive of kubebuilder's */${TUTORIAL_DIR} at ${KUBEBUILDER_TUTORIAL_COMMIT} (docs/performance.md says how)"
    exit 2
  fi
  commit="$(source_commit "${src}")"
  if [[ "${commit}" != "${KUBEBUILDER_TUTORIAL_COMMIT}" ]]; then
    log "${src} is from kubebuilder commit '${commit:-none}', not ${KUBEBUILDER_TUTORIAL_COMMIT} (KUBEBUILDER_TUTORIAL_COMMIT in hack/versions.env): make it with git archive at that commit"
    exit 2
  fi
  work="$(mktemp -d "${OUT}.src.XXXXXX")"
  # shellcheck disable=SC2064 # the directory is known now; the variable is local
  trap "rm -rf '${work}'" EXIT
  tar -xf "${src}" -C "${work}"
  local project
  project="$(find "${work}" -path "*/${TUTORIAL_DIR}/go.mod" -print -quit)"
  [[ -n "${project}" ]] || { log "${src} holds no */${TUTORIAL_DIR}/go.mod"; exit 2; }
  project="$(dirname "${project}")"
  log "building the CronJob tutorial's manager (kubebuilder ${KUBEBUILDER_TUTORIAL_COMMIT:0:12}, ${GO_VERSION})"
  (cd "${project}" && CGO_ENABLED=0 GOTOOLCHAIN=local go build -p "${CRONJOB_OPERATOR_BUILD_JOBS:-$(nproc)}" \
    -trimpath -ldflags "-s -w" -o "${work}/manager" ./cmd) >&2
  cp "${project}/config/crd/bases/${CRD}" "${work}/${CRD}"
  mv "${work}/manager" "${OUT}/manager"
  mv "${work}/${CRD}" "${OUT}/${CRD}"
}

main() {
  if ((CACHED_ONLY)); then
    built || { log "not built: run hack/build-go-tutorial.sh (docs/performance.md)"; exit 2; }
    echo "${OUT}"
    return
  fi
  mkdir -p "${OUT}"
  exec 9>"${OUT}.lock"
  flock 9
  built || build
  echo "${OUT}"
}

main
