#!/usr/bin/env bash
# Build (once) the podman image the molecule scenarios boot: Debian bookworm, systemd as
# PID 1, python3 for Ansible modules. No registry is needed: the root filesystem comes
# from debootstrap and the machine's own Debian mirror.
#
# The image carries a label with a hash of the recipe below; it is rebuilt only when it
# is missing or the recipe changed (or with FORCE=1).
#
# Environment: SUITE (Debian release, or noble for Ubuntu 24.04 from quickstart-test.sh's stock image; default bookworm; the execution environment's base is
# trixie, see scripts/ee-build.sh), IMAGE (default localhost/gpuhost-debian:$SUITE), MIRROR
# (Debian mirror URL, default: read from this machine's apt sources), FORCE=1 (rebuild).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SUITE="${SUITE:-bookworm}"
IMAGE="${IMAGE:-localhost/gpuhost-debian:$SUITE}"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/molecule/containers.conf}"
LABEL=gpuhost.recipe-sha256

# --- the recipe: everything here goes into the hash (SUITE too) -------------------------
VARIANT=minbase
INCLUDE=python3,systemd,systemd-sysv,dbus,iproute2,procps,ca-certificates,pciutils,kmod,sudo

# Runs on the unpacked root filesystem ($1) before it is imported.
customize_rootfs() {
    local rootfs="$1"
    # Units that fail or make no sense in a container; masked so that
    # `systemctl is-system-running` can answer "running".
    local unit
    for unit in systemd-udevd.service systemd-udev-trigger.service systemd-remount-fs.service \
        systemd-modules-load.service sys-kernel-config.mount sys-kernel-debug.mount \
        sys-kernel-tracing.mount getty.target console-getty.service \
        systemd-firstboot.service systemd-timesyncd.service apt-daily.timer \
        apt-daily-upgrade.timer; do
        ln -sf /dev/null "$rootfs/etc/systemd/system/$unit"
    done
    # A fresh machine-id per container; systemd fills it at boot.
    : >"$rootfs/etc/machine-id"
    rm -f "$rootfs/var/lib/dbus/machine-id"
    # Small: no package caches or lists, no documentation.
    rm -rf "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
        "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* \
        "$rootfs"/usr/share/info/* "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/*
}
IMPORT_CHANGES=(
    "CMD [\"/lib/systemd/systemd\"]"
    "STOPSIGNAL SIGRTMIN+3"
    "ENV container=podman"
)
recipe_hash() {
    {
        printf '%s\n' "$SUITE" "$VARIANT" "$INCLUDE" "${IMPORT_CHANGES[@]}"
        declare -f customize_rootfs
    } | sha256sum | cut -d' ' -f1
}
# -----------------------------------------------------------------------------------------

log() { printf 'test-image: %s\n' "$*" >&2; }
die() { printf 'test-image: error: %s\n' "$*" >&2; exit 1; }

# The first Debian mirror in this machine's apt sources (deb822 *.sources or one-line
# sources.list), for a suite of Debian's own naming; Debian's public default otherwise.
discover_mirror() {
    local debian_suites='^(buster|bullseye|bookworm|trixie|forky|duke|sid|oldstable|stable|testing|unstable)$'
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [[ -f "$f" ]] || continue
        # Stanzas are separated by blank lines; print "URI" of enabled deb stanzas
        # naming a Debian suite.
        awk -v re="$debian_suites" '
            function flush() {
                if (types ~ /(^| )deb( |$)/ && enabled !~ /^(no|false)$/ && hit && uris != "") {
                    split(uris, u, " "); print u[1]; found = 1; exit
                }
                types = ""; uris = ""; enabled = ""; hit = 0
            }
            /^[ \t]*#/ { next }
            /^[ \t]*$/ { flush(); next }
            {
                key = tolower($1); sub(/:$/, "", key)
                val = $0; sub(/^[^:]*:[ \t]*/, "", val)
                if (key == "types") types = val
                else if (key == "uris") uris = val
                else if (key == "enabled") enabled = tolower(val)
                else if (key == "suites") {
                    n = split(val, s, /[ \t]+/)
                    for (i = 1; i <= n; i++) if (s[i] ~ re) hit = 1
                }
            }
            END { if (!found) flush() }
        ' "$f" | head -n1
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f "$f" ]] || continue
        # deb [options] URI suite components...
        sed -E 's/\[[^]]*\]//' "$f" | awk -v re="$debian_suites" \
            '$1 == "deb" && $3 ~ re { print $2; exit }'
    done
}

# Ubuntu has no Debian mirror to debootstrap from here: its image starts from the stock image that
# scripts/quickstart-test.sh builds from Ubuntu's archive (the one way this project gets an Ubuntu root), with the
# recipe's packages installed by apt and the same customisation.
from_stock() {
    # Globals: the EXIT trap reads name and work after this function has returned.
    stock="localhost/gpuhost-stock:$SUITE" name="gpuhost-image-$SUITE-$$" start=$SECONDS
    # In a subshell: quickstart-test.sh has its own LABEL, recipe_hash, log and die.
    # shellcheck source=scripts/quickstart-test.sh
    (source "$ROOT/scripts/quickstart-test.sh" && ensure_image "$SUITE")
    podman rm -f "$name" >/dev/null 2>&1 || true
    podman run --name "$name" "$stock" bash -c "apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -qq --no-install-recommends ${INCLUDE//,/ } >/dev/null" \
        || die "installing the recipe's packages into $stock failed"
    work="$(mktemp -d "${TMPDIR:-/var/tmp}/gpuhost-image.XXXXXX")"
    trap 'rm -rf "$work"; podman rm -f "$name" >/dev/null 2>&1 || true' EXIT
    mkdir "$work/rootfs"
    podman export "$name" | tar -C "$work/rootfs" -x
    customize_rootfs "$work/rootfs"
    local changes=()
    for c in "${IMPORT_CHANGES[@]}" "LABEL $LABEL=$want"; do
        changes+=(--change "$c")
    done
    tar --numeric-owner --xattrs -C "$work/rootfs" -c . | podman import --quiet "${changes[@]}" - "$IMAGE" >/dev/null
    log "built $IMAGE from $stock in $((SECONDS - start)) s"
}

want="$(recipe_hash)"
have="$(podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$IMAGE" 2>/dev/null || true)"
if [[ "${FORCE:-0}" != 1 && "$have" == "$want" ]]; then
    log "$IMAGE is up to date"
    exit 0
fi

[[ "$(id -u)" -eq 0 ]] || die "debootstrap needs root; run as root (or sudo make image)"
if [[ "$SUITE" == noble ]]; then
    from_stock
    exit 0
fi
command -v debootstrap >/dev/null 2>&1 || die "debootstrap is missing; run 'make system-deps' first"
command -v podman >/dev/null 2>&1 || die "podman is missing; run 'make system-deps' first"

MIRROR="${MIRROR:-$(discover_mirror | head -n1)}"
if [[ -z "$MIRROR" ]]; then
    MIRROR=http://deb.debian.org/debian
    log "no Debian mirror in apt sources; using $MIRROR"
fi

if [[ -n "$have" ]]; then
    log "recipe changed; rebuilding $IMAGE"
fi
work="$(mktemp -d "${TMPDIR:-/var/tmp}/gpuhost-image.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"

start=$SECONDS
log "debootstrap $SUITE ($VARIANT) from $MIRROR"
if ! debootstrap --variant="$VARIANT" --include="$INCLUDE" "$SUITE" "$rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1; then
    tail -n 30 "$work/debootstrap.log" >&2
    [[ -f "$rootfs/debootstrap/debootstrap.log" ]] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
    die "debootstrap failed (mirror: $MIRROR; set MIRROR=... to use another)"
fi
boot=$((SECONDS - start))
customize_rootfs "$rootfs"

old_id="$(podman image inspect --format '{{ .Id }}' "$IMAGE" 2>/dev/null || true)"
changes=()
for c in "${IMPORT_CHANGES[@]}" "LABEL $LABEL=$want"; do
    changes+=(--change "$c")
done
tar --numeric-owner --xattrs -C "$rootfs" -c . \
    | podman import --quiet "${changes[@]}" - "$IMAGE" >/dev/null
new_id="$(podman image inspect --format '{{ .Id }}' "$IMAGE")"
if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
    podman rmi "$old_id" >/dev/null 2>&1 || true
fi
size="$(podman image inspect --format '{{ .Size }}' "$IMAGE")"
log "built $IMAGE in $((SECONDS - start)) s (debootstrap ${boot} s, $((size / 1024 / 1024)) MiB)"
