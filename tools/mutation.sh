#!/usr/bin/env bash
# Opt-in mutation testing with mutmut (never run by CI): mutate one module, run the tests that hold its
# promises against every mutant, print the score and the survivors. See docs/testing.md.
#
#   tools/mutation.sh MODULE [TEST_PATH ...]     e.g. tools/mutation.sh redaction
#
# MODULE is a path under src/baton without .py (hitl/broker, hitl/creating, hitl/deciding, hitl/pending_page,
# hitl/inbox_access, hitl/waiting, timers/service, timers/mirror, timers/listing, receipts, gateway/proxy,
# gateway/call_approval, gateway/upstream, subagents/turns, subagents/messaging, redaction); without
# TEST_PATHs the module's default tests below are used.
# The run happens in a copy of the tracked files (under ${MUTATION_DIR:-/tmp/baton-mutation}/MODULE),
# so the work tree is never touched; run `mutmut show NAME` in that directory to read a survivor.
# MUTANTS='GLOB ...' runs only the mutants whose names match (mutmut's fnmatch globs), e.g. a sample of a
# slow module: MUTANTS='baton.gateway.serving.proxy.*__mutmut_3' tools/mutation.sh gateway/proxy
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
module=${1:?usage: tools/mutation.sh MODULE [TEST_PATH ...]}
shift
if [ $# -eq 0 ]; then
  case "$module" in
    redaction) set -- tests/test_redaction_edges.py tests/test_redaction.py tests/test_receipts.py ;;
    receipts) set -- tests/test_receipts.py tests/test_receipt_log.py tests/test_concurrency.py tests/test_store_databases.py \
      tests/test_checkpoints.py::test_verify_streams_and_checks_checkpoints_on_each_database ;;
    hitl/broker) set -- tests/hitl/test_broker.py tests/hitl/test_pending_page.py tests/hitl/test_broker_decisions.py \
      tests/test_concurrency.py ;;
    hitl/creating) set -- tests/hitl/test_broker.py tests/hitl/test_broker_decisions.py tests/hitl/test_escalation.py \
      tests/hitl/test_people.py ;;
    hitl/deciding) set -- tests/hitl/test_broker.py tests/hitl/test_broker_decisions.py tests/hitl/test_people.py \
      tests/test_concurrency.py ;;
    hitl/pending_page) set -- tests/hitl/test_pending_page.py tests/hitl/test_pending_page_driver.py tests/hitl/test_broker.py ;;
    hitl/inbox_access) set -- tests/hitl/test_inbox.py tests/hitl/test_agent_token_never_decides.py \
      tests/hardening/test_tokens_login.py ;;
    hitl/waiting) set -- tests/hitl/test_broker.py tests/hitl/test_tools_stdio.py tests/hitl/test_mrtr.py \
      tests/hitl/test_elicited_answers.py tests/test_tasks.py ;;
    timers/service) set -- tests/test_timers_core.py tests/test_timers_service.py tests/test_concurrency.py ;;
    timers/mirror) set -- tests/test_timers_core.py tests/test_timers_service.py ;;
    timers/listing) set -- tests/test_timers_core.py tests/test_timers_service.py tests/test_corrupted_rows.py ;;
    gateway/proxy | gateway/call_approval | gateway/upstream) set -- tests/gateway/test_runtime_proxy.py ;;
    subagents/turns) set -- tests/test_subagents_runner.py tests/test_cost_budgets.py tests/test_subagent_bounds.py \
      tests/test_subagent_tools.py ;;
    subagents/messaging) set -- tests/test_subagents_runner.py tests/test_cost_budgets.py tests/test_subagent_tools.py ;;
    *) echo "no default tests for $module; name them" >&2; exit 2 ;;
  esac
fi
[ -f "src/baton/$module.py" ] || { echo "no module src/baton/$module.py" >&2; exit 2; }
python=${PYTHON:-$root/.venv/bin/python}
"$python" -m mutmut --version >/dev/null 2>&1 || {
  echo "mutmut is not installed: $python -m pip install -e '.[mutation]'" >&2
  exit 2
}

work=${MUTATION_DIR:-/tmp/baton-mutation}/${module//\//_}
rm -rf "$work"
mkdir -p "$work"
git ls-files -z | tar --null -cf - -T - | tar -xf - -C "$work"
quoted=$(printf '"%s", ' "$@")
cat >>"$work/pyproject.toml" <<TOML

[tool.mutmut]
source_paths = ["src/baton"]
only_mutate = ["src/baton/$module.py"]
pytest_add_cli_args_test_selection = [${quoted%, }]
pytest_add_cli_args = ["-p", "no:randomly", "-n", "0", "-q"]
also_copy = ["tests", "bench"]
TOML
cd "$work"
set -f # the globs are mutmut's, not the shell's
read -ra names <<<"${MUTANTS:-}"
set +f
"$python" -m mutmut run "${names[@]}" >mutmut-run.log 2>&1 || { tail -40 mutmut-run.log >&2; exit 1; }
{ "$python" -m mutmut results --all true 2>&1 || "$python" -m mutmut results 2>&1; } | { grep -v ': not checked' || true; } >results.txt
total=$(grep -c ': ' results.txt || true)
killed=$(grep -c ': killed' results.txt || true)
survived=$(grep -c ': survived' results.txt || true)
echo "module src/baton/$module.py, tests: $*"
echo "mutants: $total, killed: $killed, survived: $survived, other (timeout, suspicious, no tests): $((total - killed - survived))"
grep -v ': killed' results.txt || true
echo "(work directory: $work)"
