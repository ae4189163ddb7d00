# Shared by the hack/ scripts (source it; it defines functions and REPO_ROOT only).
# Everything it logs goes to stderr, so scripts can keep stdout for their results.

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${REPO_ROOT}/.venv"

log() { echo "$(basename "$0"): $*" >&2; }

# ensure_venv: create .venv with the package and its test extras when it is missing, and
# install them again when pyproject.toml changed since (a new pin or tool).
ensure_venv() {
  local stamp="${VENV}/.pyproject.sha256" wanted
  wanted="$(sha256sum "${REPO_ROOT}/pyproject.toml" | cut -d' ' -f1)"
  if [[ -x "${VENV}/bin/python" && "$(cat "${stamp}" 2>/dev/null)" == "${wanted}" ]] &&
    "${VENV}/bin/python" -c 'import cronjob_operator' 2>/dev/null; then
    return 0
  fi
  log "installing into ${VENV} (python3 -m venv; pip install -e '.[test,bench]')"
  [[ -x "${VENV}/bin/python" ]] || python3 -m venv "${VENV}" >&2
  "${VENV}/bin/python" -m pip install --quiet -e "${REPO_ROOT}[test,bench]" >&2
  echo "${wanted}" >"${stamp}"
}

# bin_dir: print the directory of the control plane's binaries, building them if needed
# ($CRONJOB_OPERATOR_BIN_DIR wins when set).
bin_dir() {
  if [[ -n "${CRONJOB_OPERATOR_BIN_DIR:-}" ]]; then
    echo "${CRONJOB_OPERATOR_BIN_DIR}"
  else
    "${REPO_ROOT}/hack/build-binaries.sh"
  fi
}

# cache_root: where the hack/ scripts keep what they build (outside the repo).
cache_root() { echo "${CRONJOB_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cronjob-operator}"; }

# ensure_commands COMMAND=PACKAGE...: install, with apt-get, the Debian package of every
# COMMAND that is not on PATH, saying what it installs (a fresh machine has none of them).
ensure_commands() {
  local pair missing=()
  for pair in "$@"; do
    command -v "${pair%%=*}" >/dev/null || missing+=("${pair#*=}")
  done
  ((${#missing[@]} == 0)) && return 0
  log "installing Debian packages: ${missing[*]} (apt-get install --no-install-recommends)"
  command -v apt-get >/dev/null || { log "no apt-get: install ${missing[*]} yourself"; return 1; }
  if [[ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -print -quit 2>/dev/null)" ]]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
}

# write_kubernetes_module DIR MODULE: a throwaway go.mod in DIR (module MODULE) that
# requires k8s.io/kubernetes $KUBERNETES_VERSION and replaces every staging module with
# its tagged version (k8s v1.Y.Z -> v0.Y.Z), the list taken from that version's own
# go.mod, with its go and godebug lines (`go install k8s.io/kubernetes/cmd/...` cannot work).
write_kubernetes_module() {
  local dir="$1" module="$2" gomod staging="v0.${KUBERNETES_VERSION#v1.}"
  mkdir -p "${dir}"
  gomod="$(go mod download -json "k8s.io/kubernetes@${KUBERNETES_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  {
    echo "module ${module}"
    echo
    grep -E '^go [0-9]' "${gomod}"
    grep -E '^godebug ' "${gomod}" || true
    echo
    echo "require k8s.io/kubernetes ${KUBERNETES_VERSION}"
    echo
    grep -E '=> \./staging/src/' "${gomod}" | awk -v v="${staging}" '{print "replace " $1 " => " $1 " " v}'
  } > "${dir}/go.mod"
}

# kubernetes_ldflags: the -X flags that make a binary report $KUBERNETES_VERSION
# (otherwise /version says v0.0.0 and version-aware clients misbehave).
kubernetes_ldflags() {
  local minor="${KUBERNETES_VERSION#v1.}" now p flags=""
  minor="${minor%%.*}"
  now="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${p}.gitVersion=${KUBERNETES_VERSION} -X ${p}.gitMajor=1 -X ${p}.gitMinor=${minor}"
    flags+=" -X ${p}.gitCommit=0000000000000000000000000000000000000000 -X ${p}.gitTreeState=clean -X ${p}.buildDate=${now}"
  done
  echo "${flags}"
}
