#!/usr/bin/env bash
# The README's quick start as a newcomer meets it: a clean clone of this repository (its committed state)
# in a fresh container of each stock release, the README's quick-start block run as written, as root, and
# the audit report checked. Nothing else is installed first: the image holds what every server and cloud
# image of the release carries at least (its minimal base, python3, CA certificates); whatever else the
# quick start needs, the README must say.
#
# Releases: bookworm (Debian 12, Python 3.11), trixie (Debian 13, Python 3.13), noble (Ubuntu 24.04,
# Python 3.12). The images are built here with debootstrap, from the Debian mirror of this machine's apt
# sources and the Ubuntu archive, no registry; each is cached (localhost/gpuhost-stock:<release>) and
# rebuilt when its recipe changes. A run takes minutes per release (apt, the controller venv from the
# package index, the audit): `make quickstart-test`, not part of `make test`. The line each release ends with
# is the measurement of what a newcomer waits for: how long the audit step took (`make audit`, the venv
# included), how large .venv grew, and the longest the output stood still, with the line it stood on
# (the whole log, each line stamped with its second: .cache/quickstart/<release>.log). A fresh Debian 12
# alone: `RELEASES=bookworm make quickstart-test`.
#
# Environment: RELEASES (default "bookworm trixie noble"), DEBIAN_MIRROR, UBUNTU_MIRROR, FORCE=1 (rebuild
# the images), QUICKSTART_CA (a CA bundle the containers' pip trusts, default this machine's: where TLS
# goes through a proxy, a stock container would not reach the package index otherwise; a machine with
# plain internet needs none), LOGS (default .cache/quickstart), REF (the commit to test, default HEAD:
# REF=<an older commit> shows what a newcomer met then; the block still comes from this README).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
RELEASES="${RELEASES:-bookworm trixie noble}"
LOGS="${LOGS:-$ROOT/.cache/quickstart}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/molecule/containers.conf}"
LABEL=gpuhost.stock-recipe-sha256
# The marker lines in README.md: the first ```sh block after the setup marker is what a stock install lacks,
# run whole; the first ```sh block after the quick-start marker is the quick start, whose first command (the
# audit) is run: its second, `make test`, is the whole test suite, which CI runs on its own.
SETUP_MARKER='<!-- quickstart-setup:'
MARKER='<!-- quickstart:'

log() { printf 'quickstart-test: %s\n' "$*" >&2; }
die() { printf 'quickstart-test: error: %s\n' "$*" >&2; exit 1; }

# --- the README's block ------------------------------------------------------------------------------
sh_block() {
    awk -v marker="$1" '
        index($0, marker) == 1 { seen = 1; next }
        seen && !inside && /^```(sh|bash)[[:space:]]*$/ { inside = 1; next }
        inside && /^```[[:space:]]*$/ { exit }
        inside { print }
    ' "$ROOT/README.md"
}

quickstart_audit() {
    sh_block "$MARKER" | grep -v '^[[:space:]]*\(#\|$\)' | head -n 1
}

# --- stock images ------------------------------------------------------------------------------------
# The first Debian mirror named in this machine's apt sources (deb822 URIs or one-line deb), else Debian's.
debian_mirror() {
    local m
    m="$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources 2>/dev/null \
        | sed -nE 's/^URIs:[[:space:]]*([^[:space:]]+).*/\1/p; s/^deb[[:space:]]+(\[[^]]*\][[:space:]]+)?([^[:space:]]+).*/\2/p' \
        | grep -E '/debian/?$' | head -n1 || true)"
    echo "${m:-http://deb.debian.org/debian}"
}

family() {
    case "$1" in
        bookworm|trixie) echo debian ;;
        noble) echo ubuntu ;;
        *) die "unknown release '$1': bookworm, trixie or noble" ;;
    esac
}

# What goes into an image; its hash labels the image, so a change rebuilds it.
INCLUDE=python3,ca-certificates
recipe_hash() {
    { echo "$1" "$INCLUDE" minbase; declare -f build_image stock_sources; } | sha256sum | cut -d' ' -f1
}

# Ubuntu's archive key, for debootstrap to check the noble archive: Debian 13 packages it
# (ubuntu-archive-keyring), and apt in the trixie image checks that package's signature through Debian's.
ubuntu_keyring() {
    local dest="$1"
    if [[ -f /usr/share/keyrings/ubuntu-archive-keyring.gpg ]]; then
        cp /usr/share/keyrings/ubuntu-archive-keyring.gpg "$dest"
        return
    fi
    ensure_image trixie
    podman run --rm localhost/gpuhost-stock:trixie bash -c 'apt-get update -qq >/dev/null &&
        apt-get install -y -qq --no-install-recommends ubuntu-archive-keyring >/dev/null &&
        cat /usr/share/keyrings/ubuntu-archive-keyring.gpg' >"$dest" \
        || die "could not get Ubuntu's archive key from Debian 13's ubuntu-archive-keyring package"
}

# The package sources the release's installer writes (debootstrap writes only "<suite> main"): Ubuntu
# enables universe, where python3-venv lives on 24.04; both add the updates and security suites.
stock_sources() {
    local release="$1" mirror="${2%/}" rootfs="$3"
    rm -f "$rootfs/etc/apt/sources.list"
    if [[ "$(family "$release")" == ubuntu ]]; then
        cat >"$rootfs/etc/apt/sources.list.d/ubuntu.sources" <<EOF
Types: deb
URIs: $mirror/
Suites: $release $release-updates $release-backports $release-security
Components: main restricted universe multiverse
Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg
EOF
    else
        cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $release main non-free-firmware
deb $mirror-security $release-security main non-free-firmware
deb $mirror $release-updates main non-free-firmware
EOF
    fi
}

build_image() {
    local release="$1" image="$2" work rootfs mirror args=()
    work="$(mktemp -d "${TMPDIR:-/var/tmp}/gpuhost-stock.XXXXXX")"
    rootfs="$work/rootfs"
    if [[ "$(family "$release")" == ubuntu ]]; then
        mirror="${UBUNTU_MIRROR:-http://archive.ubuntu.com/ubuntu}"
        ubuntu_keyring "$work/ubuntu.gpg"
        args+=(--keyring="$work/ubuntu.gpg")
    else
        mirror="${DEBIAN_MIRROR:-$(debian_mirror)}"
    fi
    # Debian 12's debootstrap predates noble; every Ubuntu release since 7.10 uses the gutsy script.
    local script=()
    if [[ ! -e "/usr/share/debootstrap/scripts/$release" && "$(family "$release")" == ubuntu ]]; then
        script=(/usr/share/debootstrap/scripts/gutsy)
    fi
    log "debootstrap $release from $mirror"
    if ! debootstrap --variant=minbase --include="$INCLUDE" "${args[@]}" "$release" "$rootfs" "$mirror" \
        "${script[@]}" >"$work/debootstrap.log" 2>&1; then
        tail -n 20 "$work/debootstrap.log" >&2
        rm -rf "$work"
        die "debootstrap $release failed (mirror $mirror)"
    fi
    stock_sources "$release" "$mirror" "$rootfs"
    # As a fresh machine has it: no package lists yet, so the first apt-get install needs an update.
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/archives/*.deb
    tar --numeric-owner -C "$rootfs" -c . \
        | podman import --quiet --change "LABEL $LABEL=$(recipe_hash "$release")" - "$image" >/dev/null
    rm -rf "$work"
}

ensure_image() {
    local release="$1" image="localhost/gpuhost-stock:$1" have start
    have="$(podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$image" 2>/dev/null || true)"
    if [[ "${FORCE:-0}" != 1 && "$have" == "$(recipe_hash "$release")" ]]; then
        return
    fi
    start=$SECONDS
    build_image "$release" "$image"
    log "built $image in $((SECONDS - start)) s"
}

# --- one release -------------------------------------------------------------------------------------
# In the container: the block as written, then the checks. The commands' output goes to the log.
CHECKS='
for f in reports/localhost.md reports/localhost.json reports/fleet.md; do
    [ -s "$f" ] || { echo "quickstart-test: $f is missing or empty after the quick start" >&2; exit 1; }
done
.venv/bin/python - <<"EOF"
import json, sys
report = json.load(open("reports/localhost.json"))
import ansible.release
summary = report.get("summary") or {}
print("quickstart-test: report of %s: %s (%s); Python %s, ansible-core %s" % (
    report.get("host"), summary.get("verdict"), summary.get("virtualization"), sys.version.split()[0],
    ansible.release.__version__))
EOF
grep -q localhost reports/fleet.md || { echo "quickstart-test: reports/fleet.md has no row for localhost" >&2; exit 1; }
echo "quickstart-test: .venv holds $(du -sm .venv | cut -f1) MB"
'

run_release() {
    local release="$1" clone log ca_args=() start elapsed rc=0
    ensure_image "$release"
    clone="$(mktemp -d "${TMPDIR:-/var/tmp}/gpuhost-clone.XXXXXX")"
    # A clean clone: committed files only, no .venv, no .cache, no reports.
    git clone --quiet --no-hardlinks "$ROOT" "$clone/gpuhost"
    git -C "$clone/gpuhost" checkout --quiet --detach "$(git -C "$ROOT" rev-parse "${REF:-HEAD}")"
    if [[ -n "$CA" ]]; then
        ca_args=(-v "$CA:/etc/quickstart-ca.crt:ro" -e PIP_CERT=/etc/quickstart-ca.crt)
    fi
    log="$LOGS/$release.log"
    start=$SECONDS
    # Each line of the log starts with the seconds since the container started, so that the longest silence
    # (a step that says nothing while it works) can be measured.
    podman run --rm -v "$clone/gpuhost:/root/gpuhost" -w /root/gpuhost "${ca_args[@]}" \
        "localhost/gpuhost-stock:$release" bash -c "set -euo pipefail; PS4='+ '; set -x; $SETUP
set +x; audit_start=\$SECONDS; set -x
$AUDIT
set +x; echo \"quickstart-test: the audit step took \$((SECONDS - audit_start)) s\"
$CHECKS" 2>&1 | stamp_lines "$start" >"$log" || rc=$?
    elapsed=$((SECONDS - start))
    rm -rf "$clone"
    if ((rc != 0)); then
        tail -n 30 "$log" >&2
        log "$release: FAILED (exit $rc) after $elapsed s; whole log: $log"
        return 1
    fi
    log "$release: passed in $elapsed s: $(measured "$log")"
    log "$release: $(grep -o 'quickstart-test: report .*' "$log" | cut -d' ' -f2-)"
}

stamp_lines() {
    local began="$1" line
    while IFS= read -r line; do
        printf '[%4d s] %s\n' "$((SECONDS - began))" "$line"
    done
}

# "the audit step took 41 s, .venv holds 71 MB, longest silence 12 s (before: <line>)" from a stamped log.
measured() {
    local log="$1" audit venv silence
    audit="$(grep -o 'the audit step took [0-9]* s' "$log" | head -n 1)"
    venv="$(grep -o '\.venv holds [0-9]* MB' "$log" | head -n 1)"
    silence="$(awk -F'[][]' '{ t = $2 + 0; if (NR > 1 && t - last > gap) { gap = t - last; what = prev } last = t; prev = $0 }
        END { printf "longest silence %d s (before: %s)", gap, substr(what, 1, 100) }' "$log")"
    echo "${audit:-the audit step did not end}, ${venv:-no .venv}, $silence"
}

# --- main --------------------------------------------------------------------------------------------
# Sourced (scripts/test-image.sh takes its stock images from here), it only defines the functions above.
[[ "${BASH_SOURCE[0]}" == "$0" ]] || return 0
[[ "$(id -u)" -eq 0 ]] || die "debootstrap and podman's images need root; run as root"
for cmd in debootstrap podman git; do
    command -v "$cmd" >/dev/null 2>&1 || die "$cmd is missing; run 'make system-deps' first"
done
SETUP="$(sh_block "$SETUP_MARKER")"
AUDIT="$(quickstart_audit)"
[[ -n "$(sh_block "$SETUP_MARKER")" && -n "$(sh_block "$MARKER")" ]] \
    || die "README.md needs a setup block and a quick-start block: lines starting '$SETUP_MARKER' and '$MARKER', each followed by a \`\`\`sh block"
CA="${QUICKSTART_CA-}"
if [[ -z "${QUICKSTART_CA+set}" && -f /etc/ssl/certs/ca-certificates.crt ]]; then
    CA=/etc/ssl/certs/ca-certificates.crt
fi
mkdir -p "$LOGS"
log "the README's quick start:"
sed 's/^/    /' <<<"$SETUP"$'\n'"$AUDIT" >&2
passed=() failed=()
for release in $RELEASES; do
    family "$release" >/dev/null
    if run_release "$release"; then passed+=("$release"); else failed+=("$release"); fi
done
log "passed: ${passed[*]:-none}; failed: ${failed[*]:-none}"
((${#failed[@]} == 0))
