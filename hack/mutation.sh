#!/usr/bin/env bash
# Mutation testing of the decision code: are the unit tests able to fail? mutmut (pinned
# in pyproject's `mutation` extra) mutates the modules listed in pyproject's
# [tool.mutmut] only_mutate, runs the tests in tests/unit that cover each mutated
# function (no cluster), one worker and one module at a time, and this script prints
# per module killed/survived/timeout/total and the surviving mutants.
#
#   hack/mutation.sh                                  # every listed module, from scratch
#   hack/mutation.sh cronjob_operator.runtime.status  # some of them (dotted names)
#   MUTATION_KEEP=1 hack/mutation.sh ...              # reuse ./mutants/ (the cache)
#   .venv/bin/mutmut show <mutant>                    # the diff of one survivor
#
# It starts from an empty ./mutants/ unless MUTATION_KEEP=1, so a score never mixes
# results of older tests. Exits non-zero only when mutmut itself fails.
set -euo pipefail

# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "${REPO_ROOT}"

ensure_venv
if ! "${VENV}/bin/python" -c 'import mutmut' 2>/dev/null; then
  log "installing the mutation extra (pip install -e '.[mutation]')"
  "${VENV}/bin/python" -m pip install --quiet -e "${REPO_ROOT}[mutation]" >&2
fi

# The modules come from pyproject (one place): cronjob_operator/a/b.py -> cronjob_operator.a.b
mapfile -t listed < <("${VENV}/bin/python" - <<'EOF'
import tomllib
with open("pyproject.toml", "rb") as f:
    for path in tomllib.load(f)["tool"]["mutmut"]["only_mutate"]:
        print(path.removesuffix(".py").replace("/", "."))
EOF
)
modules=("$@")
[[ ${#modules[@]} -gt 0 ]] || modules=("${listed[@]}")

[[ "${MUTATION_KEEP:-0}" == 1 ]] || rm -rf mutants
for module in "${modules[@]}"; do
  log "mutating ${module}"
  started=${SECONDS}
  # mutmut's progress spinner rewrites one line; keep only its summary on stderr.
  "${VENV}/bin/mutmut" run --max-children 1 "${module}.*" 2>&1 | tr '\r' '\n' |
    grep -E '^(Running|[0-9.]+ mutations/second|Failed)' >&2 || true
  [[ ${PIPESTATUS[0]} -eq 0 ]] || { log "mutmut failed on ${module}"; exit 1; }
  log "${module}: $((SECONDS - started)) s"
done

# The score, per module, from mutmut's results in mutants/<path>.meta.
"${VENV}/bin/python" - "${modules[@]}" <<'EOF'
import json
import sys
from collections import Counter
from pathlib import Path

from mutmut.stats import status_by_exit_code

print(f"{'module':45} {'killed':>6} {'survived':>8} {'timeout':>7} {'other':>5} {'total':>5}  killed/total")
survivors = []
for module in sys.argv[1:]:
    meta = Path("mutants", *module.split(".")).with_suffix(".py.meta")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    counts = Counter(status_by_exit_code[code] for code in codes.values())
    survivors += sorted(
        f"{name} ({status_by_exit_code[code]})"
        for name, code in codes.items()
        if status_by_exit_code[code] in ("survived", "no tests")
    )
    total = sum(counts.values())
    other = total - counts["killed"] - counts["survived"] - counts["timeout"]
    score = counts["killed"] / total if total else 1.0
    print(
        f"{module:45} {counts['killed']:6} {counts['survived']:8} {counts['timeout']:7}"
        f" {other:5} {total:5}  {score:.1%}"
    )
print(f"\nsurvivors and untested ({len(survivors)}):")
for name in survivors:
    print(f"  {name}")
EOF
