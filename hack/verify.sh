#!/usr/bin/env bash
# The quick check, with no cluster and no Go build: lint (ruff check), format (ruff
# format --check), types (mypy, strict), dead code (vulture, configured in pyproject.toml)
# and every test not marked `cluster` (the unit tests), in a minute or so once .venv
# exists. hack/test.sh runs these same stages, then the cluster suite. Exits non-zero when
# any stage fails (pytest's "no tests collected", exit 5, included) and prints how long
# each stage took. Arguments go to pytest, after `-m "not cluster"`
# (`hack/verify.sh tests/unit/test_schedule.py`, `hack/verify.sh -k cron`).
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

TIMINGS=()
FAILED=()
# The ids of the tests that failed in any stage (tests/conftest.py appends them), printed
# again by finish under the timings.
CRONJOB_OPERATOR_FAILURES_FILE="$(mktemp)"
export CRONJOB_OPERATOR_FAILURES_FILE

# stage NAME COMMAND...: run one stage, record its wall time and whether it failed.
stage() {
  local name="$1" started status=0 elapsed_ms
  shift
  echo "==> ${name}: $*" >&2
  started="${EPOCHREALTIME/./}"
  "$@" || status=$?
  elapsed_ms=$(((${EPOCHREALTIME/./} - started) / 1000))
  TIMINGS+=("$(printf '%-12s %4d.%01ds  %s' "${name}" $((elapsed_ms / 1000)) $((elapsed_ms % 1000 / 100)) \
    "$([[ ${status} -eq 0 ]] && echo ok || echo "FAILED (exit ${status})")")")
  [[ ${status} -eq 0 ]] || FAILED+=("${name}")
  return 0
}

# finish: print the timings and exit, non-zero when a stage failed.
finish() {
  echo "==> timings" >&2
  printf '  %s\n' "${TIMINGS[@]}" >&2
  if [[ -s "${CRONJOB_OPERATOR_FAILURES_FILE}" ]]; then
    echo "==> failed tests" >&2
    sed 's/^/  /' "${CRONJOB_OPERATOR_FAILURES_FILE}" >&2
  fi
  rm -f "${CRONJOB_OPERATOR_FAILURES_FILE}"
  if [[ ${#FAILED[@]} -gt 0 ]]; then
    echo "==> FAILED: ${FAILED[*]}" >&2
    exit 1
  fi
  echo "==> all stages passed" >&2
}

# verify_stages [PYTEST_ARGS...]: the stages that need nothing but .venv, in order.
verify_stages() {
  stage ruff "${VENV}/bin/ruff" check .
  stage format "${VENV}/bin/ruff" format --check .
  stage mypy "${VENV}/bin/mypy"
  stage deadcode "${VENV}/bin/vulture"
  stage unit "${VENV}/bin/pytest" -m "not cluster" "$@"
}

main() {
  cd "${REPO_ROOT}"
  stage venv ensure_venv
  [[ ${#FAILED[@]} -eq 0 ]] || finish
  verify_stages "$@"
  finish
}

# Sourced by hack/test.sh for its stages; run, the quick check.
if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  main "$@"
fi
