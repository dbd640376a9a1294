#!/usr/bin/env bash
# Install the system packages the test suite needs (Debian/Ubuntu, apt).
#
# Quiet and quick when everything is present; runs `apt-get update` once, and only when
# something is missing. Extra packages can be named as arguments.
set -euo pipefail

PACKAGES=(
    podman          # container engine for the molecule scenarios
    runc            # the OCI runtime that works here (crun cannot set rlimits)
    debootstrap     # builds the test image's root filesystem
    uidmap          # newuidmap/newgidmap for podman
    slirp4netns     # user-mode networking for podman
    passt
    fuse-overlayfs
    catatonit       # init for `podman run --init`
    iptables        # NAT for podman's bridge network
    iproute2
    tar
    make
    gnupg           # signs the stand-in apt repository of tests/aptrepo (gpg, gpg-agent, gpgv)
    prometheus      # promtool: make alerts checks and tests monitoring/'s alert rules
    slurmctld       # a real Slurm for the prolog's drain and resume (tests/unit/tooling/test_gpu_prolog_slurm.py)
    slurmd
    slurm-client    # scontrol, sinfo
    chromium        # opens the reports' SVG pictures headless (tests/unit/report/test_pictures_browser.py)
)
PACKAGES+=("$@")

log() { printf 'system-deps: %s\n' "$*" >&2; }

# ansible-navigator refuses to run podman execution environments (make ee-test) without
# /dev/mqueue, which systemd mounts on most machines but minimal VMs and containers lack.
if [[ ! -d /dev/mqueue ]]; then
    if [[ "$(id -u)" -eq 0 ]]; then
        mkdir -p /dev/mqueue
        mount -t mqueue mqueue /dev/mqueue 2>/dev/null || true
        log "created /dev/mqueue for ansible-navigator"
    else
        log "warning: /dev/mqueue is missing and ansible-navigator needs it: run 'sudo mkdir /dev/mqueue'"
    fi
fi

if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
    missing=()
    for cmd in podman runc debootstrap; do
        command -v "$cmd" >/dev/null 2>&1 || missing+=("$cmd")
    done
    if ((${#missing[@]})); then
        log "error: no apt on this machine; install these with your package manager: ${missing[*]}"
        exit 1
    fi
    exit 0
fi

missing=()
for pkg in "${PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)"
    [[ "$status" == ii* ]] || missing+=("$pkg")
done
((${#missing[@]})) || exit 0

if [[ "$(id -u)" -ne 0 ]]; then
    log "error: missing system packages: ${missing[*]}"
    log "run as root:  apt-get update && apt-get install -y ${missing[*]}"
    log "(or: sudo make system-deps)"
    exit 1
fi

log "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
start=$SECONDS
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "done in $((SECONDS - start)) s"
