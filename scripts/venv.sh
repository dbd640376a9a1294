#!/usr/bin/env bash
# Create or refresh the controller virtual environment (.venv in the repository root).
#
# The interpreter is the newest Python >= 3.12 that actually runs: pyenv shims on PATH
# that have no version selected are skipped. Candidates, in order:
#   python3.13 and python3.12 on PATH, pyenv's versions/3.1[2-9]*, the system python3,
#   (Debian, as root) python3 from apt when the archive's version is new enough, and last
#   a Python downloaded by uv (from PyPI) into .cache/python, for hosts such as Debian 12
#   whose own python3 is too old. VENV_NO_DOWNLOAD=1 turns that last step off.
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
MIN_MINOR=12

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
    for c in python3.13 python3.12; do
        command -v "$c" || true
    done
    if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
        for c in "$root"/versions/3.1[2-9]*/bin/python3; do
            [[ -x "$c" ]] && echo "$c"
        done
    fi
    for c in /usr/local/bin/python3 /usr/bin/python3; do
        [[ -x "$c" ]] && echo "$c"
    done
    return 0
}

find_python() {
    local c line found=""
    while IFS= read -r c; do
        [[ -n "$c" ]] || continue
        if line="$(probe "$c")"; then
            found+="$line"$'\n'
        fi
    done < <(candidates)
    # Newest version wins; print its real executable.
    printf '%s' "$found" | sort -V -k1,1 | tail -n1 | cut -d' ' -f2-
}

# Debian/Ubuntu: install python3 (+ venv) from the archive when that one is >= 3.12.
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
        log "installing python3 $cand from apt"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 python3-venv >/dev/null || return 1
        return 0
    fi
    log "apt offers python3 $cand, older than $MIN_MAJOR.$MIN_MINOR"
    return 1
}

# Last resort: uv, installed from PyPI into a bootstrap venv of any python3, fetches a
# standalone CPython build into .cache/python (needs the internet beyond PyPI).
uv_python() {
    [[ "${VENV_NO_DOWNLOAD:-0}" != 1 ]] || return 1
    local base boot="$ROOT/.cache/uv-bootstrap" dest="$ROOT/.cache/python"
    base="$(command -v python3 || true)"
    [[ -n "$base" ]] || return 1
    if [[ ! -x "$boot/bin/uv" ]]; then
        if ! "$base" -c 'import venv, ensurepip' 2>/dev/null && command -v apt-get >/dev/null 2>&1 \
            && [[ "$(id -u)" -eq 0 ]]; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null 2>&1 || true
        fi
        log "fetching uv from PyPI to download Python $MIN_MAJOR.$MIN_MINOR"
        "$base" -m venv "$boot" >/dev/null 2>&1 || return 1
        "$boot/bin/python" -m pip install --quiet --disable-pip-version-check uv >/dev/null || return 1
    fi
    "$boot/bin/uv" python install --install-dir "$dest" "$MIN_MAJOR.$MIN_MINOR" >&2 || return 1
    UV_PYTHON_INSTALL_DIR="$dest" "$boot/bin/uv" python find --managed-python \
        "$MIN_MAJOR.$MIN_MINOR" 2>/dev/null
}

if ! venv_ok; then
    py="$(find_python)"
    if [[ -z "$py" ]] && apt_python; then
        py="$(find_python)"
    fi
    if [[ -z "$py" ]]; then
        py="$(uv_python)" || py=""
        [[ -n "$py" ]] && py="$(PYTHON="$py" find_python)"
    fi
    if [[ -z "$py" ]]; then
        die "no usable Python >= $MIN_MAJOR.$MIN_MINOR found (ansible-core needs it on the controller).
  Tried: python3.13, python3.12 on PATH, \$(pyenv root)/versions/3.1[2-9]*, the system python3,
  python3 from apt, and a download through uv. Install one (for example 'pyenv install 3.12',
  or python3.12 with its venv module from your distribution), or point PYTHON=/path/to/python3
  at it, then re-run."
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
