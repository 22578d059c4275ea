#!/usr/bin/env bash
# .ci/run on a clean clone of this repository's main beside two busy loops (one per core of a 2-core
# machine), as docs/testing.md records it: prints the wall time, the pytest summary and the load.
# Usage: tools/busy_ci.sh [DIR]   (DIR: where to clone; default a new temporary directory)
set -u
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
dir=${1:-$(mktemp -d)/baton-ci}
# mktemp makes its directory 0700: the tests that run the standalone verifier as nobody (uid 65534) must
# reach the clone, as they do in a CI checkout
chmod 755 "$(dirname "$dir")"
git clone -q "$repo" "$dir" || exit 1
yes > /dev/null & first=$!
yes > /dev/null & second=$!
trap 'kill "$first" "$second" 2>/dev/null' EXIT
start=$(date +%s)
(cd "$dir" && CI=true bash .ci/run) > "$dir.log" 2>&1
status=$?
end=$(date +%s)
grep -E "^test order|[0-9]+ (passed|failed)" "$dir.log" | tail -2
echo "exit $status, wall $((end - start)) s, load $(cut -d' ' -f1-3 /proc/loadavg) (log: $dir.log)"
exit "$status"
