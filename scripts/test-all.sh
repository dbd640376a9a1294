#!/usr/bin/env bash
# What `make test` runs (and CI, through .ci/run), in this order:
#   setup     venv, torch-venv, system-deps, image: stops at the first that fails, since nothing can be tested then;
#   tests     lint, alerts, fleet, docs-test, ee-test, collection-test, sanity, one after another, each run
#             whatever the one before did; unit runs beside them in one process (the steps above keep the second
#             core busy with ansible's workers and podman), its output printed whole when it ends and kept in
#             .cache/test-logs/unit.log;
#   molecule  every scenario, two at a time (scripts/molecule_all.py).
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
BESIDE=unit
LAST=molecule

if [[ "${1:-}" == --dry-run ]]; then
    echo "make test would run these steps (dry run: nothing was run, nothing passed or failed):"
    for t in "${SETUP[@]}" "${STEPS[@]}" "$BESIDE" "$LAST"; do
        if [[ "$t" == "$BESIDE" ]]; then
            echo "=== make $t (beside ${STEPS[0]} to ${STEPS[-1]})"
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
rm -f "$logs/$BESIDE.rc" "$logs/$BESIDE.seconds"
(
    began=$SECONDS rc=0
    PYTEST_ADDOPTS="-p no:cacheprovider" "$MAKE" --no-print-directory "$BESIDE" >"$logs/$BESIDE.log" 2>&1 || rc=$?
    echo $((SECONDS - began)) >"$logs/$BESIDE.seconds"
    echo "$rc" >"$logs/$BESIDE.rc"
) &
beside=$!

for t in "${STEPS[@]}"; do
    step "$t" || true
done

wait "$beside" || true
echo "=== make $BESIDE (run beside ${STEPS[0]} to ${STEPS[-1]}; log: $logs/$BESIDE.log)"
cat "$logs/$BESIDE.log"
report "$BESIDE" "$(cat "$logs/$BESIDE.rc" 2>/dev/null || echo 1)" "$(cat "$logs/$BESIDE.seconds" 2>/dev/null || echo 0)"

step "$LAST" || true

slowest="$(printf '%s\n' "${times[@]}" | sort -rn | head -n 1)"
echo "make test: passed: ${passed[*]:-none}; failed: ${failed[*]:-none}; $((SECONDS - start)) s in all," \
    "the slowest step: ${slowest#* } (${slowest%% *} s)"
((${#failed[@]} == 0))
