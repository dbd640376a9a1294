#!/usr/bin/env bash
# Create .cache/torch-venv: a Python 3.11 virtual environment with the CPU build of torch,
# for the tests that run the collective benchmark harness for real with the gloo backend.
#
# The controller venv (.venv) has no torch on purpose: on real hosts the harness runs with the
# serving venv's interpreter, given to the modules as `python:`. This venv stands in for it.
#
# Only torch 2.13.0 is installed, for Python 3.11 only: that is the build our CI machines hold
# on disk (pip's find-links), so the install takes seconds. Before installing, pip is asked what
# it would fetch; a CUDA build (several GB from PyPI) is refused unless TORCH_VENV_ALLOW_DOWNLOAD=1.
# Re-running is a no-op while the stamp matches.
#
# Environment: TORCH_VENV (default <repo>/.cache/torch-venv), TORCH_PYTHON (a Python 3.11 to use).
# Exit status: 0 ready, 1 impossible here (the message says why and what to do).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${TORCH_VENV:-$ROOT/.cache/torch-venv}"
TORCH_SPEC="torch==2.13.0"
WANT_MINOR="3.11"
STAMP="$DEST/.torch-venv-stamp"
STAMP_TEXT="$TORCH_SPEC python$WANT_MINOR"

log() { printf 'torch-venv: %s\n' "$*" >&2; }
die() { printf 'torch-venv: error: %s\n' "$*" >&2; exit 1; }

# Cheap on purpose (no torch import): the test suite calls this script on every run.
torch_ok() {
    [[ -x "$DEST/bin/python" ]] && "$DEST/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec(\"torch\") is None)" 2>/dev/null
}

if [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$STAMP_TEXT" ]] && torch_ok; then
    exit 0
fi

# Prints the real executable of $1 when it runs and is Python 3.11 with venv and ensurepip.
probe() {
    "$1" -c "
import sys
if '%d.%d' % sys.version_info[:2] != '$WANT_MINOR':
    sys.exit(1)
import venv, ensurepip
print(sys.executable)
" 2>/dev/null
}

find_python() {
    local c root
    local -a cands=()
    if [[ -n "${TORCH_PYTHON:-}" ]]; then
        cands+=("$TORCH_PYTHON")
    else
        cands+=(python3.11 python3)
        if command -v pyenv >/dev/null 2>&1 && root="$(pyenv root 2>/dev/null)"; then
            for c in "$root"/versions/3.11*/bin/python3; do
                [[ -x "$c" ]] && cands+=("$c")
            done
        fi
        cands+=(/usr/bin/python3.11 /usr/local/bin/python3.11)
    fi
    for c in "${cands[@]}"; do
        command -v "$c" >/dev/null 2>&1 || [[ -x "$c" ]] || continue
        if probe "$c"; then
            return 0
        fi
    done
    return 1
}

tried="python3.11, python3, \$(pyenv root)/versions/3.11*, /usr/bin/python3.11"
py="$(find_python)" || die "no Python $WANT_MINOR with its venv module found (tried ${TORCH_PYTHON:-$tried}). The CPU torch build these tests use is a Python \
$WANT_MINOR wheel; install Python $WANT_MINOR (for example 'pyenv install 3.11') or point TORCH_PYTHON at one."

if [[ ! -x "$DEST/bin/python" ]] || ! probe "$DEST/bin/python" >/dev/null; then
    log "creating $DEST with $py"
    rm -rf "$DEST"
    mkdir -p "$(dirname "$DEST")"
    "$py" -m venv "$DEST" || die "'$py -m venv $DEST' failed"
fi

pip=("$DEST/bin/python" -m pip --disable-pip-version-check)

# Ask pip which file it would install, without installing it.
if [[ "${TORCH_VENV_ALLOW_DOWNLOAD:-0}" != 1 ]]; then
    report="$("${pip[@]}" install --quiet --dry-run --no-deps --ignore-installed --report - "$TORCH_SPEC" 2>/dev/null)" \
        || die "pip cannot find $TORCH_SPEC for Python $WANT_MINOR (no wheel in its index or find-links). Put the \
CPU wheel (torch-2.13.0+cpu-cp311-...whl) in a directory named by PIP_FIND_LINKS and re-run."
    url="$(printf '%s' "$report" | "$DEST/bin/python" -c '
import json, sys
items = json.load(sys.stdin).get("install") or [{}]
print((items[0].get("download_info") or {}).get("url", ""))')"
    case "$url" in
        *+cpu*|*%2Bcpu*) ;;
        *) die "pip would install $TORCH_SPEC from ${url:-an unknown place}, which is not the CPU build and \
weighs several GB with its CUDA libraries. Put the CPU wheel in a directory named by PIP_FIND_LINKS, or set \
TORCH_VENV_ALLOW_DOWNLOAD=1 to accept the download." ;;
    esac
fi

log "installing $TORCH_SPEC into $DEST"
start=$SECONDS
# --no-compile: the tests import a small part of torch, compiled when first imported; compiling all of it here
# took longer than unpacking it.
"${pip[@]}" install --quiet --progress-bar off --no-compile "$TORCH_SPEC" || die "pip install $TORCH_SPEC failed (see above)"
"$DEST/bin/python" -W ignore -c 'import torch.distributed' || die "torch was installed but '$DEST/bin/python -c \"import torch.distributed\"' fails"
echo "$STAMP_TEXT" >"$STAMP"
log "ready in $((SECONDS - start)) s: torch $("$DEST/bin/python" -c 'import torch; print(torch.__version__)')"
