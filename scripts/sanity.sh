#!/usr/bin/env bash
# ansible-test sanity on the collection as users get it: the tarball `make collection` builds, installed into
# a temporary ansible_collections/gpuhost/gpu with tests/sanity/ (the ignore file) beside it. The install lies
# outside the checkout: inside a git work tree, ansible-test takes its file list from git, which ignores it.
#
# Offline: ansible-test's own environments are made from its pinned requirement files with pip from the
# configured package index; its download of get-pip.py is replaced by scripts/sanity_pip_bootstrap.py.
# The tools run in .cache/sanity-venv (the controller venv's ansible-core and Python, plus the sanity
# requirements); ansible-test's HOME is .cache/sanity/home, so nothing outside the checkout changes.
# Arguments go to ansible-test sanity (e.g. --test pep8).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.cache/sanity-venv"
WORK="$ROOT/.cache/sanity"
log() { printf 'sanity: %s\n' "$*" >&2; }
die() { printf 'sanity: error: %s\n' "$*" >&2; exit 1; }

[[ -x "$ROOT/.venv/bin/python" ]] || die "no controller venv: run make venv first"
core="$("$ROOT/.venv/bin/python" -c 'import ansible; print(ansible.__version__)')"
python="$("$ROOT/.venv/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"

# The sanity venv: the same ansible-core and Python as the controller venv, with ansible-test's pinned
# requirements for every sanity test, rebuilt when the core version changes.
mkdir -p "$WORK"
if [[ "$(cat "$VENV/.core" 2>/dev/null)" != "$core" ]]; then
    log "creating $VENV (ansible-core $core, Python $python)"
    rm -rf "$VENV"
    "$ROOT/.venv/bin/python" -m venv "$VENV"
    "$VENV/bin/pip" install -q "ansible-core==$core" >"$WORK/pip.log" 2>&1 || { cat "$WORK/pip.log" >&2; die "pip failed"; }
    reqs="$("$VENV/bin/python" -c 'import ansible_test, os; print(os.path.join(os.path.dirname(ansible_test.__file__), "_data", "requirements"))')"
    "$VENV/bin/pip" install -q $(for f in "$reqs"/sanity.*.txt; do printf -- '-r %s ' "$f"; done) >"$WORK/pip.log" 2>&1 \
        || { cat "$WORK/pip.log" >&2; die "pip failed"; }
    echo "$core" > "$VENV/.core"
fi

pip_version="$(sed -nE "s/^ *pip='([0-9.]+)',.*/\1/p" \
    "$("$VENV/bin/python" -c 'import ansible_test, os; print(os.path.dirname(ansible_test.__file__))')/_internal/python_requirements.py")"
[[ -n "$pip_version" ]] || die "cannot tell which pip this ansible-test bootstraps (python_requirements.py changed?)"
mkdir -p "$WORK/home/.ansible/test/cache"
cp "$ROOT/scripts/sanity_pip_bootstrap.py" "$WORK/home/.ansible/test/cache/get_pip_${pip_version//./_}.py"

tarball="$("$ROOT/scripts/collection.sh" 2>"$WORK/build.log")" || { cat "$WORK/build.log" >&2; die "the build failed"; }
root="$(mktemp -d "${TMPDIR:-/tmp}/gpuhost-sanity.XXXXXX")"
trap 'rm -rf "$root"' EXIT
# --force: run from the checkout, whose ansible.cfg puts the checkout itself (gpuhost.gpu) on the collections
# path, an install would find the collection "already installed" and copy nothing.
"$VENV/bin/ansible-galaxy" collection install --force --no-deps -p "$root" "$tarball" >/dev/null 2>&1 \
    || die "cannot install $tarball into $root"
installed="$root/ansible_collections/gpuhost/gpu"
mkdir -p "$installed/tests"
cp -r "$ROOT/tests/sanity" "$installed/tests/"
log "ansible-test sanity (ansible-core $core, Python $python) on $tarball"
cd "$installed"
HOME="$WORK/home" PATH="$VENV/bin:$PATH" "$VENV/bin/ansible-test" sanity --local --python "$python" --color no "$@"
