#!/usr/bin/env bash
# Create or refresh the controller virtual environment (.venv in the repository root).
#
# The interpreter is the newest Python >= 3.11 that actually runs: pyenv shims on PATH that
# have no version selected are skipped. Candidates, in order: python3.13, python3.12 and
# python3.11 on PATH, pyenv's versions/3.1[1-9]*, the system python3. Which ansible-core the
# venv gets follows from that Python (environment markers in requirements-runtime.txt):
# 2.21 on Python >= 3.12, 2.19 on 3.11, the newest release whose controller still runs there
# (ansible-core 2.20 and later declare Requires-Python >=3.12). So Debian 12 (3.11),
# Ubuntu 24.04 (3.12) and Debian 13 (3.13) all work with their own python3.
# Debian and Ubuntu split the venv module into python3-venv: as root the script installs it
# with apt; otherwise it prints the exact command. Nothing is downloaded from anywhere but
# the distribution's archive and the Python package index.
# Re-running is fast while .venv matches requirements-controller.txt and the files it includes
# with -r (hash stamp).
#
# Environment: VENV (default <repo>/.venv), PYTHON (use this interpreter, skip the search).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
REQS="$ROOT/requirements-controller.txt"
STAMP="$VENV/.requirements.sha256"
MIN_MAJOR=3
MIN_MINOR=11

log() { printf 'venv: %s\n' "$*" >&2; }
die() { printf 'venv: error: %s\n' "$*" >&2; exit 1; }

[[ -f "$REQS" ]] || die "missing $REQS"
# The files REQS includes with `-r` (relative to it) count too: a change to any of them refreshes.
mapfile -t INCLUDED < <(sed -nE 's/^[[:space:]]*(-r|--requirement)[[:space:]=]+([^[:space:]#]+).*/\2/p' "$REQS")
for i in "${!INCLUDED[@]}"; do
    INCLUDED[i]="$(dirname "$REQS")/${INCLUDED[i]}"
    [[ -f "${INCLUDED[i]}" ]] || die "$(basename "$REQS") includes ${INCLUDED[i]}, which does not exist"
done
want="$(cat "$REQS" "${INCLUDED[@]}" | sha256sum | cut -d' ' -f1)"

# Prints "<version> <real executable>" when $1 runs, is new enough and can build a venv.
probe() {
    "$1" -c "
import sys
if sys.version_info < ($MIN_MAJOR, $MIN_MINOR):
    sys.exit(1)
import venv, ensurepip  # Debian splits these into python3-venv
print('%d.%d.%d' % sys.version_info[:3], sys.executable)
" 2>/dev/null
}

# Prints "<version> <real executable>" when $1 runs and is new enough, venv module or not.
probe_version() {
    "$1" -c "
import sys
if sys.version_info < ($MIN_MAJOR, $MIN_MINOR):
    sys.exit(1)
print('%d.%d.%d' % sys.version_info[:3], sys.executable)
" 2>/dev/null
}

venv_ok() {
    [[ -x "$VENV/bin/python" ]] && probe "$VENV/bin/python" >/dev/null
}

# Fast path: environment exists, runs, and was built from these requirements.
if venv_ok && [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$want" ]]; then
    exit 0
fi

candidates() {
    local c root
    if [[ -n "${PYTHON:-}" ]]; then
        echo "$PYTHON"
        return
    fi
    for c in python3.13 python3.12 python3.11; do
        command -v "$c" || true
    done
    if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
        for c in "$root"/versions/3.1[1-9]*/bin/python3; do
            [[ -x "$c" ]] && echo "$c"
        done
    fi
    for c in /usr/local/bin/python3 /usr/bin/python3; do
        [[ -x "$c" ]] && echo "$c"
    done
    return 0
}

# $1: the probe (probe, or probe_version to find interpreters that lack only the venv module).
find_python() {
    local check="${1:-probe}" c line found=""
    while IFS= read -r c; do
        [[ -n "$c" ]] || continue
        if line="$("$check" "$c")"; then
            found+="$line"$'\n'
        fi
    done < <(candidates)
    # Newest version wins; print its real executable.
    printf '%s' "$found" | sort -V -k1,1 | tail -n1 | cut -d' ' -f2-
}

# Debian/Ubuntu, as root: install python3 and its venv module from the archive when the
# archive's python3 is new enough (Debian 12: 3.11, Ubuntu 24.04: 3.12, Debian 13: 3.13).
# python3-venv pulls the venv and ensurepip of the default python3 only (python3.11-venv on
# Debian 12); another interpreter found on PATH keeps whatever it has.
apt_python() {
    command -v apt-get >/dev/null 2>&1 || return 1
    [[ "$(id -u)" -eq 0 ]] || return 1
    local cand
    cand="$(apt-cache policy python3 2>/dev/null | awk '/Candidate:/ {print $2}')"
    if [[ -z "$cand" || "$cand" == "(none)" ]]; then
        apt-get update -qq >/dev/null || return 1
        cand="$(apt-cache policy python3 2>/dev/null | awk '/Candidate:/ {print $2}')"
    fi
    [[ -n "$cand" && "$cand" != "(none)" ]] || return 1
    if dpkg --compare-versions "$cand" ge "$MIN_MAJOR.$MIN_MINOR"; then
        log "installing python3 $cand and python3-venv from apt"
        if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null; then
            # A stale package list is the usual cause on a fresh machine.
            apt-get update -qq >/dev/null || return 1
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null || return 1
        fi
        return 0
    fi
    log "apt offers python3 $cand, older than $MIN_MAJOR.$MIN_MINOR"
    return 1
}

if ! venv_ok; then
    py="$(find_python)"
    if [[ -z "$py" ]] && apt_python; then
        py="$(find_python)"
    fi
    if [[ -z "$py" ]]; then
        bare="$(find_python probe_version)"
        if [[ -n "$bare" ]]; then
            die "$bare is new enough but cannot create a virtual environment: its venv module
  (ensurepip) is missing. On Debian and Ubuntu install it as root, then re-run:
      apt-get install -y python3-venv
  (for an interpreter other than the distribution's python3: its own pythonX.Y-venv package)."
        fi
        die "no Python >= $MIN_MAJOR.$MIN_MINOR found; ansible-core needs one on the controller
  (ansible-core 2.19 on Python 3.11, 2.21 on 3.12 and newer).
  Tried: python3.13, python3.12, python3.11 on PATH, \$(pyenv root)/versions/3.1[1-9]*, the system
  python3$( [[ "$(id -u)" -eq 0 ]] && command -v apt-get >/dev/null 2>&1 && echo ', python3 from apt').
  Debian 12, Debian 13 and Ubuntu 24.04 ship one: apt-get install -y python3 python3-venv.
  Elsewhere install Python >= $MIN_MAJOR.$MIN_MINOR with its venv module from your distribution, or
  point PYTHON=/path/to/python3 at one, then re-run."
    fi
    log "creating $VENV with $py ($("$py" -c 'import platform; print(platform.python_version())'))"
    rm -rf "$VENV"
    "$py" -m venv "$VENV"
fi

log "installing $(basename "$REQS") into $VENV"
start=$SECONDS
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --progress-bar off -r "$REQS"
echo "$want" >"$STAMP"
log "ready in $((SECONDS - start)) s: $("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])'), \
ansible-core $("$VENV/bin/python" -c 'from ansible.release import __version__ as v; print(v)')"
