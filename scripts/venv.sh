#!/usr/bin/env bash
# Create or refresh the controller virtual environment (.venv in the repository root).
#
# Usage: scripts/venv.sh [audit|dev]
#   audit  what `make audit` and `make analyze` need: requirements-audit.txt (ansible-core, nvidia-ml-py;
#          tens of MB, seconds)
#   dev    everything: requirements-controller.txt (the run-time set with the `ansible` bundle of
#          collections, and the development, test and build tools; ~360 MB, a minute or two). The default.
# One venv serves both: each level has its own stamp, and the dev install holds every audit pin, so after
# `make test` a `make audit` installs nothing.
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
# Re-running is fast while .venv matches the level's requirements file and the files it includes
# with -r (hash stamp). A venv built in another directory (a moved or copied checkout: its scripts'
# `#!` lines name the old place, so they cannot run) is rebuilt, and the script says so.
# pip's output is condensed to a line per package and its full text kept in .venv/pip-install.log; while
# pip is silent (unpacking the `ansible` package, 440 MB), a line every 15 s says how large .venv has grown.
#
# Environment: VENV (default <repo>/.venv), PYTHON (use this interpreter, skip the search).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$ROOT/.venv}"
LEVEL="${1:-dev}"
case "$LEVEL" in
    audit) REQS="$ROOT/requirements-audit.txt" ;;
    dev) REQS="$ROOT/requirements-controller.txt" ;;
    *) printf 'venv: error: unknown level %s: audit (what make audit needs) or dev (everything)\n' "$LEVEL" >&2; exit 2 ;;
esac
# The dev install holds every audit pin (a unit test keeps it so): it refreshes the audit stamp too.
STAMP="$VENV/.requirements-$LEVEL.sha256"
MIN_MAJOR=3
MIN_MINOR=11

log() { printf 'venv: %s\n' "$*" >&2; }
die() { printf 'venv: error: %s\n' "$*" >&2; exit 1; }

# The requirements file and every file it includes with `-r` (relative to the including file), recursively; a
# missing one is printed too, for the check below.
req_files() {
    local file="$1" inc
    echo "$file"
    [[ -f "$file" ]] || return 0
    while IFS= read -r inc; do
        req_files "$(dirname "$file")/$inc"
    done < <(sed -nE 's/^[[:space:]]*(-r|--requirement)[[:space:]=]+([^[:space:]#]+).*/\2/p' "$file")
}
# A change to any of them refreshes the venv.
mapfile -t FILES < <(req_files "$REQS")
for f in "${FILES[@]}"; do
    [[ -f "$f" ]] || die "missing $f$([[ "$f" == "$REQS" ]] || echo ", which $(basename "$REQS") includes")"
done
want="$(cat "${FILES[@]}" | sha256sum | cut -d' ' -f1)"

# Prints "<version> <real executable>" when $1 runs, is new enough and can build a venv. The executable of a venv's
# Python is its base interpreter's: the Makefile puts .venv/bin first on PATH, and a venv about to be rebuilt
# (or any other) must not be the one the new venv is made from.
probe() {
    "$1" -c "
import sys
if sys.version_info < ($MIN_MAJOR, $MIN_MINOR):
    sys.exit(1)
import venv, ensurepip  # Debian splits these into python3-venv
print('%d.%d.%d' % sys.version_info[:3], sys.executable if sys.prefix == sys.base_prefix else sys._base_executable)
" 2>/dev/null
}

# Prints "<version> <real executable>" when $1 runs and is new enough, venv module or not.
probe_version() {
    "$1" -c "
import sys
if sys.version_info < ($MIN_MAJOR, $MIN_MINOR):
    sys.exit(1)
print('%d.%d.%d' % sys.version_info[:3], sys.executable if sys.prefix == sys.base_prefix else sys._base_executable)
" 2>/dev/null
}

# Prints the venv directory that $VENV's scripts were written for, when that is another directory: pip writes
# the venv's absolute path into every script's `#!` line (long paths: into an `exec` line below `#!/bin/sh`),
# so a venv moved or copied with its checkout has scripts that point at the old place, or at nothing.
venv_built_for() {
    local script line built
    for script in "$VENV/bin/pip" "$VENV/bin/ansible-playbook"; do
        [[ -f "$script" ]] || continue
        line="$(head -n 1 "$script")"
        if [[ "$line" == "#!/bin/sh"* ]]; then
            line="$(sed -nE "2,3s/^'''exec' \"([^\"]*)\".*/\\1/p" "$script" | head -n 1)"
        else
            line="${line#\#!}"
            line="${line%% *}"
        fi
        [[ "$line" == /*/bin/python* ]] || continue
        built="${line%/bin/python*}"
        if [[ "$(realpath -m "$built")" != "$(realpath -m "$VENV")" ]]; then
            echo "$built"
            return
        fi
    done
}

venv_ok() {
    [[ -x "$VENV/bin/python" ]] && probe "$VENV/bin/python" >/dev/null || return 1
    local built
    built="$(venv_built_for)"
    if [[ -n "$built" ]]; then
        log "$VENV was built as $built (a moved or copied checkout): its scripts point there; rebuilding it here"
        return 1
    fi
}

# Fast path: environment exists, runs, and was built from these requirements.
healthy=false
if venv_ok; then
    healthy=true
    if [[ -f "$STAMP" ]] && [[ "$(cat "$STAMP")" == "$want" ]]; then
        exit 0
    fi
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

if ! $healthy; then
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

# How many packages the files pin (one name pinned per Python version counts once): the progress's "of N".
total="$(sed -E 's/#.*//; s/^[[:space:]]+//; /^(-|$)/d; s/[[:space:]<>=!~;\[].*//' "${FILES[@]}" \
    | tr 'A-Z_.' 'a-z--' | sort -u | wc -l)"

# Reads pip's output; prints a line per package it fetches, the large downloads with their sizes, and, when
# pip says nothing for 15 s (unpacking ~440 MB of collections takes a while), how large the venv has grown.
progress() {
    local line pending="" name n=0 began=$SECONDS rc
    local -A seen=()
    while true; do
        if IFS= read -r -t 15 line; then
            line="$pending$line"
            pending=""
        else
            rc=$?
            ((rc > 128)) || break
            pending+="$line"
            log "  ... still installing: $(du -sm "$VENV" 2>/dev/null | cut -f1) MB in $(basename "$VENV") after $((SECONDS - began)) s"
            continue
        fi
        case "$line" in
            "Processing /"*)
                # A wheel from a local mirror: "Processing /dir/jinja2-3.1.6-py3-none-any.whl (from ...)".
                line="${line%% (from*}"
                line="${line##*/}"
                name="${line%%-*}"
                line="${line#*-}"
                line="$name==${line%%-*}"
                ;&
            "Collecting "*|"Requirement already satisfied: "*)
                line="${line#Collecting }"
                line="${line#Requirement already satisfied: }"
                name="${line%%[^A-Za-z0-9._-]*}"
                name="${name,,}"
                [[ -z "${seen[${name//[._]/-}]:-}" ]] || continue
                seen[${name//[._]/-}]=1
                n=$((n + 1))
                [[ "$line" == *" in /"* ]] || log "  [$n/$total] ${line%% (from*}" ;;
            *"Downloading "*" MB)"|*"Downloading "*" GB)")
                [[ "$line" == *.metadata* ]] || log "  downloading ${line##*Downloading }" ;;
            "Installing collected packages: "*)
                line="${line#Installing collected packages: }"
                log "  unpacking $(($(tr -cd ',' <<<"$line" | wc -c) + 1)) packages into $(basename "$VENV")" ;;
            "Successfully installed "*)
                line="${line#Successfully installed }"
                log "  installed $(wc -w <<<"$line") packages" ;;
            "WARNING: Location '"*"' is ignored: "*)
                ;;  # an index of pip's configuration without this package: pip looks in the next one
            ERROR*|error*|WARNING*)
                log "  $line" ;;
        esac
    done
}

log "installing $(basename "$REQS") ($LEVEL: $total packages) into $VENV; pip's full output: $VENV/pip-install.log"
start=$SECONDS
rc=0
# --no-compile: Python compiles a module when it is first imported; compiling every file at install time was
# more than half of the dev install (the `ansible` bundle's collections are thousands of files the controller never
# imports) and ~200 MB of __pycache__.
PYTHONUNBUFFERED=1 "$VENV/bin/python" -m pip install --disable-pip-version-check --progress-bar off --no-compile \
    -r "$REQS" 2>&1 \
    | tee "$VENV/pip-install.log" | progress || rc=$?
if ((rc != 0)); then
    tail -n 25 "$VENV/pip-install.log" >&2
    die "pip could not install $(basename "$REQS") (exit $rc); whole output: $VENV/pip-install.log"
fi
echo "$want" >"$STAMP"
rm -f "$VENV/.requirements.sha256"  # the one stamp of earlier versions of this script
if [[ "$LEVEL" == dev ]]; then
    cat "$ROOT/requirements-audit.txt" | sha256sum | cut -d' ' -f1 >"$VENV/.requirements-audit.sha256"
fi
core="$("$VENV/bin/python" -c 'from ansible.release import __version__ as v; print(v)' 2>/dev/null || echo none)"
log "ready in $((SECONDS - start)) s: Python $("$VENV/bin/python" -c 'import sys; print(sys.version.split()[0])'), \
ansible-core $core, $(du -sm "$VENV" | cut -f1) MB"
