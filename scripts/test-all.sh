#!/usr/bin/env bash
# What `make test` runs (and CI, through .ci/run), in this order:
#   setup     venv, torch-venv, system-deps, image: stops at the first that fails, since nothing can be tested then;
#   then two lines of work side by side, so that both cores stay busy from the first test to the last:
#   tests     lint, alerts, fleet, docs-test, ee-test, collection-test, sanity, one after another, each run
#             whatever the one before did;
#   beside    unit (one process), then molecule (every scenario, MOLECULE_JOBS at a time: scripts/molecule_all.py), one
#             after the other, each one's output kept in .cache/test-logs/<step>.log and printed whole once the
#             tests line is done and the step has ended.
# The tests line takes about as long as the unit tests and the first scenarios beside it; run after it, molecule
# would leave a core idle through all of the tests line's single-process steps (lint, sanity) and its own waits.
# Each step ends with a line that says how it went and how long it took ("=== make fleet: passed in 512 s"); the
# last line lists the steps that passed and failed, the time in all and the slowest step.
#
# Usage: scripts/test-all.sh [--dry-run]; environment: MAKE (default make), TEST_LOGS (default .cache/test-logs)
#   --dry-run  (what `make -n test` runs) prints each step's commands, as `make -n <step>` gives them; runs nothing.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT" || exit 1
MAKE="${MAKE:-make}"
SETUP=(venv torch-venv system-deps image)
STEPS=(lint alerts fleet docs-test ee-test collection-test sanity)
BESIDE=(unit molecule)

if [[ "${1:-}" == --dry-run ]]; then
    echo "make test would run these steps (dry run: nothing was run, nothing passed or failed):"
    for t in "${SETUP[@]}" "${STEPS[@]}" "${BESIDE[@]}"; do
        if [[ " ${BESIDE[*]} " == *" $t "* ]]; then
            echo "=== make $t (beside ${STEPS[0]} to ${STEPS[-1]}: ${BESIDE[*]}, one after the other)"
        else
            echo "=== make $t"
        fi
        "$MAKE" --no-print-directory -n "$t" || exit
    done
    exit 0
fi

start=$SECONDS
passed=() failed=() times=()

# Runs `make $1` in the foreground; records and prints its verdict and time; returns its status.
step() {
    local t="$1" began=$SECONDS rc=0
    echo "=== make $t"
    "$MAKE" --no-print-directory "$t" || rc=$?
    report "$t" "$rc" $((SECONDS - began))
    return "$rc"
}

report() {
    local t="$1" rc="$2" secs="$3"
    times+=("$secs $t")
    if ((rc == 0)); then
        passed+=("$t")
        echo "=== make $t: passed in $secs s"
    else
        failed+=("$t")
        echo "=== make $t: FAILED (exit $rc) after $secs s"
    fi
}

for t in "${SETUP[@]}"; do
    if ! step "$t"; then
        echo "make test: setup step '$t' failed after $((SECONDS - start)) s; nothing was tested" >&2
        exit 1
    fi
done

logs="${TEST_LOGS:-.cache/test-logs}"
mkdir -p "$logs"
for t in "${BESIDE[@]}"; do
    rm -f "$logs/$t.rc" "$logs/$t.seconds"
done
(
    for t in "${BESIDE[@]}"; do
        began=$SECONDS rc=0
        PYTEST_ADDOPTS="-p no:cacheprovider" "$MAKE" --no-print-directory "$t" >"$logs/$t.log" 2>&1 || rc=$?
        echo $((SECONDS - began)) >"$logs/$t.seconds"
        echo "$rc" >"$logs/$t.rc"
    done
) &
beside=$!

for t in "${STEPS[@]}"; do
    step "$t" || true
done

# The steps beside, in their order: one that has ended is printed whole; the last one, when still running, is
# followed until the line beside ends (molecule prints each scenario as it ends), so that the run never goes quiet
# for long. Its .rc is written last; the line beside may also have died.
for t in "${BESIDE[@]}"; do
    echo "=== make $t (run beside ${STEPS[0]} to ${STEPS[-1]}; log: $logs/$t.log)"
    if [[ "$t" == "${BESIDE[-1]}" ]]; then
        tail -n +1 -F --pid="$beside" "$logs/$t.log" 2>/dev/null
    else
        while [[ ! -e "$logs/$t.rc" ]] && kill -0 "$beside" 2>/dev/null; do
            sleep 2
        done
        cat "$logs/$t.log" 2>/dev/null
    fi
    report "$t" "$(cat "$logs/$t.rc" 2>/dev/null || echo 1)" "$(cat "$logs/$t.seconds" 2>/dev/null || echo 0)"
done
wait "$beside" || true

slowest="$(printf '%s\n' "${times[@]}" | sort -rn | head -n 1)"
echo "make test: passed: ${passed[*]:-none}; failed: ${failed[*]:-none}; $((SECONDS - start)) s in all," \
    "the slowest step: ${slowest#* } (${slowest%% *} s)"
((${#failed[@]} == 0))
