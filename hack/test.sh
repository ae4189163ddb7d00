#!/usr/bin/env bash
# The whole check, as CI runs it: hack/verify.sh's stages (lint, format, types, the unit
# tests), then the cluster suite (every test marked `cluster`: integration and e2e against
# a real local control plane, with the binaries, tools and images it needs built or
# reused). Exits non-zero when any stage fails, and pytest's "no tests collected" (exit 5)
# is a failure like any other; prints how long each stage took. Arguments replace the
# cluster suite's default of the whole tests/ tree (`hack/test.sh tests/e2e/test_image.py`);
# options alone keep it (`hack/test.sh -k cron -x`, since pyproject's testpaths is tests/).
# For the quick check alone, run hack/verify.sh.
# Without arguments, the cluster suite runs in two lanes at once, each with its own
# control plane and its output prefixed with the lane's name: `e2e` (tests/e2e: the real
# node, the images, the installs; serial, since the node's Pods share the host's ports)
# and `integration` (tests/integration), after which the compatibility subset
# (COMPAT_TESTS) runs again against the oldest supported release
# (COMPAT_KUBERNETES_VERSION in versions.env, built by `build-binaries.sh --compat`).
# Most of a cluster test's time is spent waiting (a schedule's minute, a rollout, a lease),
# so two lanes on two cores take well under the time of one after the other; the suite
# must pass on a busy machine anyway.
set -euo pipefail

# shellcheck source=verify.sh
source "$(dirname "${BASH_SOURCE[0]}")/verify.sh"
cd "${REPO_ROOT}"

# What could differ on the oldest supported release: the CRDs (CEL rules, printer columns
# in `kubectl get`), the streamed initial sync and its paged-LIST fallback, server-side
# apply, config/policy's ValidatingAdmissionPolicy, the webhooks and conversion, both
# controllers against the real API server, and the run window's CEL rules (timestamps).
COMPAT_TESTS=(
  tests/integration/test_bad_input.py
  tests/integration/test_cronjob_features.py::test_next_schedule_time_advances_as_runs_happen_and_shows_in_kubectl_get
  tests/integration/test_streaming_sync.py
  tests/integration/test_server_side_apply.py
  tests/integration/test_least_privilege.py::test_only_the_manager_may_touch_the_sharding_labels
  tests/integration/test_webhooks.py
  tests/integration/test_cronjob_controller.py
  tests/integration/test_configdeployment.py
  tests/integration/test_cronjob_windows.py
)

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

# start_compat_build: build (or reuse) the oldest supported release's binaries in the
# background, niced (the tests come first), its directory and its log kept in LANE_DIR;
# COMPAT_BUILD is its process, for compat_tests to wait on. A subshell, not `nice ... &`:
# a plain background command ignores SIGINT, so Ctrl-C would leave the build running.
COMPAT_BUILD=""
start_compat_build() {
  (exec nice -n 19 "${REPO_ROOT}/hack/build-binaries.sh" --compat) \
    >"${LANE_DIR}/compat.bin_dir" 2>"${LANE_DIR}/compat.build.log" &
  COMPAT_BUILD=$!
}

# compat_tests: COMPAT_TESTS against the oldest supported release's control plane, once
# start_compat_build's build has succeeded (its log shown either way).
compat_tests() {
  local status=0
  wait "${COMPAT_BUILD}" || status=$?
  cat "${LANE_DIR}/compat.build.log" >&2
  ((status == 0)) || return "${status}"
  CRONJOB_OPERATOR_BIN_DIR="$(<"${LANE_DIR}/compat.bin_dir")" "${VENV}/bin/pytest" "${COMPAT_TESTS[@]}"
}

# lane NAME FUNCTION: run FUNCTION (which runs stages) in the background, its output
# prefixed with "[NAME] "; wait_lanes adds the lanes' stage timings and failures to ours.
LANE_DIR=""
LANES=()
lane() {
  local name="$1" function="$2"
  [[ -n "${LANE_DIR}" ]] || LANE_DIR="$(mktemp -d)"
  (
    TIMINGS=()
    FAILED=()
    "${function}" > >(sed -u "s/^/[${name}] /") 2>&1
    printf '%s\n' "${TIMINGS[@]}" >"${LANE_DIR}/${name}.timings"
    printf '%s\n' "${FAILED[@]}" >"${LANE_DIR}/${name}.failed"
  ) &
  LANES+=("$!:${name}")
}

wait_lanes() {
  local entry name line
  for entry in "${LANES[@]}"; do
    name="${entry#*:}"
    wait "${entry%%:*}" || FAILED+=("${name}")
    while IFS= read -r line; do [[ -z "${line}" ]] || TIMINGS+=("${line}"); done <"${LANE_DIR}/${name}.timings"
    while IFS= read -r line; do [[ -z "${line}" ]] || FAILED+=("${line}"); done <"${LANE_DIR}/${name}.failed"
  done
  rm -rf "${LANE_DIR}"
}

# e2e_lane: the tests that need the real node and the images, one after another.
e2e_lane() {
  stage e2e "${VENV}/bin/pytest" -m cluster tests/e2e
}

# integration_lane: the integration tests, then the compatibility subset on the oldest
# supported release (its build, when not cached, overlaps both lanes' tests).
integration_lane() {
  start_compat_build
  stage integration "${VENV}/bin/pytest" -m cluster tests/integration
  stage compat compat_tests
}

main() {
  stage venv ensure_venv
  [[ ${#FAILED[@]} -eq 0 ]] || finish
  verify_stages
  local failed_before=${#FAILED[@]}  # the cluster suite runs only when its builds succeed
  stage binaries use_binaries
  [[ ${#FAILED[@]} -eq ${failed_before} ]] && stage images use_images
  if [[ ${#FAILED[@]} -eq ${failed_before} ]]; then
    if (($# > 0)); then
      stage cluster "${VENV}/bin/pytest" -m cluster "$@"
    else
      lane e2e e2e_lane
      lane integration integration_lane
      wait_lanes
    fi
  fi
  finish
}

main "$@"
