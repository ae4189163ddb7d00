#!/usr/bin/env bash
# The whole check, as CI runs it: lint, format, types, then every test (unit,
# integration and e2e against a real local control plane). Exits non-zero when any
# stage fails, and pytest's "no tests collected" (exit 5) is a failure like any other;
# prints how long each stage took. Arguments replace pytest's default of the whole tests/
# tree (`hack/test.sh tests/unit`); options alone keep it (`hack/test.sh -k cron -x`,
# since pyproject's testpaths is tests/).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

TIMINGS=()
FAILED=()

# stage NAME COMMAND...: run one stage, record its wall time and whether it failed.
stage() {
  local name="$1" started status=0 elapsed_ms
  shift
  echo "==> ${name}: $*" >&2
  started="${EPOCHREALTIME/./}"
  "$@" || status=$?
  elapsed_ms=$(((${EPOCHREALTIME/./} - started) / 1000))
  TIMINGS+=("$(printf '%-9s %4d.%01ds  %s' "${name}" $((elapsed_ms / 1000)) $((elapsed_ms % 1000 / 100)) \
    "$([[ ${status} -eq 0 ]] && echo ok || echo "FAILED (exit ${status})")")")
  [[ ${status} -eq 0 ]] || FAILED+=("${name}")
  return 0
}

# use_binaries: build or reuse the control plane's binaries and the tools (helm,
# prometheus, promtool) for the test fixtures.
use_binaries() {
  CRONJOB_OPERATOR_BIN_DIR="$(bin_dir)" || return 1
  CRONJOB_OPERATOR_TOOLS_DIR="${CRONJOB_OPERATOR_TOOLS_DIR:-$("${REPO_ROOT}/hack/build-tools.sh")}" || return 1
  export CRONJOB_OPERATOR_BIN_DIR CRONJOB_OPERATOR_TOOLS_DIR
}

# use_images: build or reuse the operator's image (hack/build-image.sh) and the real
# node's binaries (hack/build-node.sh) for the deploy tests (tests/e2e/test_image.py,
# test_image_contents.py, test_real_node.py, test_in_cluster.py), which fail, not skip,
# without them.
use_images() {
  local image
  image="$("${REPO_ROOT}/hack/build-image.sh")" || return 1
  CRONJOB_OPERATOR_IMAGE="$(sed -n 1p <<<"${image}")"
  CRONJOB_OPERATOR_IMAGE_ARCHIVE="$(sed -n 2p <<<"${image}")"
  CRONJOB_OPERATOR_NODE_BIN_DIR="${CRONJOB_OPERATOR_NODE_BIN_DIR:-$("${REPO_ROOT}/hack/build-node.sh")}" || return 1
  export CRONJOB_OPERATOR_IMAGE CRONJOB_OPERATOR_IMAGE_ARCHIVE CRONJOB_OPERATOR_NODE_BIN_DIR
}

finish() {
  echo "==> timings" >&2
  printf '  %s\n' "${TIMINGS[@]}" >&2
  if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "==> FAILED: ${FAILED[*]}" >&2
    exit 1
  fi
  echo "==> all stages passed" >&2
}

main() {
  stage venv ensure_venv
  [[ ${#FAILED[@]} -eq 0 ]] && stage binaries use_binaries
  [[ ${#FAILED[@]} -eq 0 ]] && stage images use_images
  [[ ${#FAILED[@]} -eq 0 ]] || finish
  stage ruff "${VENV}/bin/ruff" check .
  stage format "${VENV}/bin/ruff" format --check .
  stage mypy "${VENV}/bin/mypy"
  stage pytest "${VENV}/bin/pytest" "${@:-tests}"
  finish
}

main "$@"
