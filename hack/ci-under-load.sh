#!/usr/bin/env bash
# The suite on a busy machine, as CI meets it: clone a commit afresh, keep both cores busy
# with `stress-ng --cpu 2` (installed from Debian's packages when missing), run
# `CI=true bash .ci/run` in the clone, and repeat; stop at the first red run. Prints one
# row per run (commit, load, result, wall time, pytest's summary line), measured from that
# run's log. With CONCURRENT=1 the runs go at once, each in its own clone with its own
# control plane, beside the one stress-ng (heavier than the load CI meets). Logs and clones
# live under a temporary directory that is removed on success and kept (its path printed)
# on failure.
#
#   hack/ci-under-load.sh                 # three loaded runs of HEAD, one after another
#   hack/ci-under-load.sh 1 abc1234       # one loaded run of a commit
#   LOAD=none hack/ci-under-load.sh 1     # the same, without stress-ng
#   CONCURRENT=1 hack/ci-under-load.sh 3  # three at once, beside stress-ng
#
# The control plane's binaries come from the shared cache (hack/build-binaries.sh), so only
# the first run on a fresh machine builds them.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

RUNS="${1:-3}"
COMMIT="$(git -C "${REPO_ROOT}" rev-parse --short "${2:-HEAD}")"
LOAD="${LOAD:-cpu2}"
CONCURRENT="${CONCURRENT:-0}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/ci-under-load.XXXXXX")"
STRESS_PID=""

stop_stress() {
  [[ -n "${STRESS_PID}" ]] && kill "${STRESS_PID}" 2>/dev/null && wait "${STRESS_PID}" 2>/dev/null
  STRESS_PID=""
  return 0
}
trap stop_stress EXIT

start_stress() {
  [[ "${LOAD}" == none ]] && return 0
  ensure_commands stress-ng=stress-ng
  stress-ng --cpu 2 --quiet >/dev/null 2>&1 &
  STRESS_PID=$!
}

# one_run N: clone, run, print the row; returns .ci/run's status.
one_run() {
  local n="$1" clone="${WORK}/clone-$1" logfile="${WORK}/run-$1.log" started status=0 summary
  git clone --quiet "${REPO_ROOT}" "${clone}"
  git -C "${clone}" checkout --quiet "${COMMIT}"
  started="${SECONDS}"
  log "run ${n} of ${COMMIT} (load ${LOAD}): log at ${logfile}"
  (cd "${clone}" && CI=true bash .ci/run) >"${logfile}" 2>&1 || status=$?
  summary="$(grep -E '^=+ .*(passed|failed|error).* in [0-9.]+s' "${logfile}" | tail -1 | tr -d '=' | xargs || true)"
  printf 'run %d  %s  load=%s  %s  wall %ds  %s\n' "${n}" "${COMMIT}" "${LOAD}" \
    "$([[ ${status} -eq 0 ]] && echo green || echo RED)" $((SECONDS - started)) "${summary:-no pytest summary}"
  [[ ${status} -eq 0 ]] && rm -rf "${clone}"
  return "${status}"
}

start_stress
failed=0
if [[ "${CONCURRENT}" == 1 ]]; then
  pids=()
  for ((n = 1; n <= RUNS; n++)); do
    one_run "${n}" &
    pids+=($!)
    sleep 5 # clones and venvs do not all start in the same instant
  done
  for pid in "${pids[@]}"; do wait "${pid}" || failed=1; done
else
  for ((n = 1; n <= RUNS; n++)); do
    one_run "${n}" || { failed=1; break; }
  done
fi
stop_stress
if ((failed)); then
  log "a run failed; logs under ${WORK}"
  exit 1
fi
rm -rf "${WORK}"
