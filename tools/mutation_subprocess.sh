#!/usr/bin/env bash
# Mutants mutmut cannot score on its own (see docs/testing.md): code that runs in a subprocess of the test
# (the gateway proxy inside `baton serve`) or once at import (a statement built at module level). Each named
# mutant is made active from the start, in pytest's process and in every process it starts, and the tests
# are run once; a failing run kills it.
#
#   tools/mutation_subprocess.sh MODULE NAMES_FILE TEST_PATH ...
#
# MODULE is as for tools/mutation.sh, whose work directory (with its generated mutants/) must exist: run
# tools/mutation.sh MODULE first (for the gateway it stops at "could not find any test case"). NAMES_FILE
# holds mutant names without the module prefix, one a line (e.g. `xǁGatewayProxyǁcall__mutmut_3`); the
# names are the functions `x…__mutmut_N` in mutants/src/baton/MODULE.py.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
module=${1:?usage: tools/mutation_subprocess.sh MODULE NAMES_FILE TEST_PATH ...}
names=$(realpath "${2:?a file of mutant names}")
shift 2
[ $# -gt 0 ] || { echo "name the tests" >&2; exit 2; }
python=${PYTHON:-$root/.venv/bin/python}
work=${MUTATION_DIR:-/tmp/baton-mutation}/${module//\//_}/mutants
[ -d "$work/src" ] || { echo "no $work: run tools/mutation.sh $module first" >&2; exit 2; }
prefix=baton.${module//\//.}
cd "$work"
killed=0
total=0
while read -r name; do
  [ -n "$name" ] || continue
  total=$((total + 1))
  log=$work/subprocess-$name.log
  if MUTANT_UNDER_TEST="$prefix.$name" PYTHONPATH="$work/src" CI=true timeout 600 \
    "$python" -m pytest -x -q -n 0 -p no:randomly -p no:cacheprovider "$@" >"$log" 2>&1; then
    echo "$prefix.$name: survived"
  else
    killed=$((killed + 1))
    echo "$prefix.$name: killed ($(grep -m1 -oE '^(FAILED|ERROR) [^ ]+' "$log" || echo "see $log"))"
  fi
done <"$names"
echo "mutants: $total, killed: $killed, survived: $((total - killed))"
