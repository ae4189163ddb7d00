#!/usr/bin/env bash
# Mutation testing of the decision code: are the unit tests able to fail? mutmut (pinned
# in pyproject's `mutation` extra) mutates the modules listed in pyproject's
# [tool.mutmut] only_mutate, runs the tests in tests/unit that cover each mutated
# function (no cluster), one worker and one target at a time, and this script prints
# per module killed/survived/timeout/total and the surviving mutants.
#
#   hack/mutation.sh                        # every target, from an empty ./mutants/
#   hack/mutation.sh cronjob_operator.runtime.controllerutil._status    # one module (or a mutmut glob)
#   hack/mutation.sh --survivors            # re-run only the last run's survivors
#   .venv/bin/mutmut show <mutant>          # the diff of one survivor
#
# A run starts from an empty ./mutants/ (so a score never mixes results of older tests)
# unless MUTATION_KEEP=1. --survivors keeps it and re-runs only the mutants that survived
# or had no test (after adding tests: killed ones stay killed while tests are only
# added). Exits non-zero only when mutmut itself fails.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

ensure_venv
if ! "${VENV}/bin/python" -c 'import mutmut' 2>/dev/null; then
  log "installing the mutation extra (pip install -e '.[mutation]')"
  "${VENV}/bin/python" -m pip install --quiet -e "${REPO_ROOT}[mutation]" >&2
fi

# The CronJob decision's sequencing methods (controllers/cronjob/decide.py). All of it is
# too slow on one core; the rest is event text, the conditions' wording and the error
# path, which the other listed modules' rules and the trace harness cover.
DECISIONS=(plan _schedule _record_due_runs _start_due_run _run _make_room _create _prune _sync
  _count_failures)

# The modules come from pyproject (one place): cronjob_operator/a/b.py -> cronjob_operator.a.b
mapfile -t listed < <("${VENV}/bin/python" -c '
import tomllib
with open("pyproject.toml", "rb") as f:
    for path in tomllib.load(f)["tool"]["mutmut"]["only_mutate"]:
        print(path.removesuffix(".py").replace("/", "."))
')

survivors_only=0
if [[ "${1:-}" == --survivors ]]; then
  survivors_only=1
  MUTATION_KEEP=1
  shift
fi

# A target is a glob of mutmut's mutant names (module.function__mutmut_N).
[[ $# -gt 0 ]] || set -- "${listed[@]}"
targets=()
for target in "$@"; do
  if [[ "${target}" == *'*'* ]]; then
    targets+=("${target}")
  elif [[ "${target}" == cronjob_operator.controllers.cronjob.decide ]]; then
    for method in "${DECISIONS[@]}"; do
      targets+=("${target}.xǁ_Decisionǁ${method}__mutmut_*")
    done
  else
    targets+=("${target}.*")
  fi
done

# survivors GLOB: the mutants matching GLOB that survived or had no test last time.
survivors() {
  "${VENV}/bin/python" -c '
import fnmatch, json, sys
from pathlib import Path

for meta in Path("mutants").rglob("*.py.meta"):
    for name, code in json.loads(meta.read_text())["exit_code_by_key"].items():
        if fnmatch.fnmatchcase(name, sys.argv[1]) and code in (0, 5, 33):
            print(name)
' "$1"
}

# A mutant that hangs a test (a loop that never stops) fails it after 30 s (pytest-timeout;
# the longest unit test takes about 10 s under mutmut's tracing), counted as killed,
# instead of waiting for mutmut's wall-clock timeout of 15 times the tests' duration.
export PYTEST_TIMEOUT="${PYTEST_TIMEOUT:-30}"

[[ "${MUTATION_KEEP:-0}" == 1 ]] || rm -rf mutants
# run NAME...: one mutmut run over these mutant names or globs.
run() {
  local started=${SECONDS}
  # mutmut's progress spinner rewrites one line; keep only its summary on stderr.
  "${VENV}/bin/mutmut" run --max-children 1 "$@" 2>&1 | tr '\r' '\n' |
    grep -E '^(Running|[0-9.]+ mutations/second|Failed)' >&2 || true
  [[ ${PIPESTATUS[0]} -eq 0 ]] || {
    log "mutmut failed"
    exit 1
  }
  log "done in $((SECONDS - started)) s"
}

if [[ ${survivors_only} == 1 ]]; then
  names=()
  for target in "${targets[@]}"; do
    mapfile -t -O "${#names[@]}" names < <(survivors "${target}")
  done
  log "re-running ${#names[@]} survivor(s)"
  [[ ${#names[@]} -eq 0 ]] || run "${names[@]}"
else
  for target in "${targets[@]}"; do
    log "mutating ${target}"
    run "${target}"
  done
fi

# The score per module, from mutmut's results in mutants/<path>.meta; mutants of a
# module that no target selected ("not checked") are left out of its total.
"${VENV}/bin/python" - "${listed[@]}" <<'EOF'
import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

print(f"{'module':45} {'killed':>6} {'survived':>8} {'timeout':>7} {'other':>5} {'total':>5}  killed/total")
survivors = []
for module in sys.argv[1:]:
    meta = Path("mutants", *module.split(".")).with_suffix(".py.meta")
    if not meta.exists():
        continue
    codes = {
        name: status_by_exit_code[code]
        for name, code in json.loads(meta.read_text())["exit_code_by_key"].items()
        if code is not None
    }
    if not codes:
        continue
    counts = Counter(codes.values())
    survivors += sorted(f"{n} ({s})" for n, s in codes.items() if s in ("survived", "no tests"))
    total = sum(counts.values())
    other = total - counts["killed"] - counts["survived"] - counts["timeout"]
    print(
        f"{module:45} {counts['killed']:6} {counts['survived']:8} {counts['timeout']:7}"
        f" {other:5} {total:5}  {counts['killed'] / total:.1%}"
    )
print(f"\nsurvivors and untested ({len(survivors)}):")
for name in survivors:
    print(f"  {name}")
EOF
