#!/usr/bin/env bash
# Build the execution environment (execution-environment.yml) with ansible-builder and podman,
# and print its image name on stdout (the only line this script writes there).
#
# The image is tagged with a hash of what defines it (execution-environment.yml, the pinned
# requirements-runtime.txt, this script, the base image's name, the collection's files) and labelled with that hash and
# the base image's id: it is rebuilt only when one of them changed, when it is missing, or with
# FORCE=1 (from scratch, without podman's layer cache). The default base, the local Debian 13
# image, is made first (scripts/test-image.sh with SUITE=trixie; debootstrap needs root the
# first time).
#
# Environment: EE_IMAGE (default localhost/gpuhost-ee:<hash>), EE_BASE_IMAGE (default: the
# local Debian 13 image; in production a Debian 13 image from your registry), EE_CA_BUNDLE (the
# CA bundle the build trusts, default: this machine's), FORCE=1 (rebuild).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$ROOT/molecule/containers.conf}"
DEFINITION="$ROOT/execution-environment.yml"
RUNTIME_REQS="$ROOT/requirements-runtime.txt"
LOCAL_BASE=localhost/gpuhost-debian:trixie
EE_BASE_IMAGE="${EE_BASE_IMAGE:-$LOCAL_BASE}"
WORK="$ROOT/.cache/ee"
LABEL=gpuhost.ee-recipe-sha256

log() { printf 'ee-build: %s\n' "$*" >&2; }
die() { printf 'ee-build: error: %s\n' "$*" >&2; exit 1; }

command -v podman >/dev/null 2>&1 || die "podman is missing; run 'make system-deps' first"
BUILDER="$(command -v ansible-builder || true)"
[[ -n "$BUILDER" ]] || BUILDER="$ROOT/.venv/bin/ansible-builder"
[[ -x "$BUILDER" ]] || die "ansible-builder is missing; run 'make venv' first (requirements-controller.txt pins it)"

if [[ "$EE_BASE_IMAGE" == "$LOCAL_BASE" ]]; then
    # FORCE rebuilds the EE only; the base keeps its own recipe check.
    FORCE=0 SUITE=trixie IMAGE="$LOCAL_BASE" "$ROOT/scripts/test-image.sh"
fi

# The collection the EE installs, under the fixed name execution-environment.yml copies; its FILES.json
# (every file's checksum) stands for its content, which the tarball's own bytes (timestamps) do not.
mkdir -p "$WORK"
tarball="$("$ROOT/scripts/collection.sh" 2>"$WORK/collection.log")" \
    || { cat "$WORK/collection.log" >&2; die "building the collection failed"; }
cp "$tarball" "$WORK/gpuhost-gpu.tar.gz"
version="$(cat "$DEFINITION" "$RUNTIME_REQS" "${BASH_SOURCE[0]}" <(echo "$EE_BASE_IMAGE") \
    <(tar -xzOf "$WORK/gpuhost-gpu.tar.gz" FILES.json MANIFEST.json) | sha256sum | cut -c1-12)"
EE_IMAGE="${EE_IMAGE:-localhost/gpuhost-ee:$version}"
# A registry base that is not pulled yet has no id: its name (tag or digest) stands for it.
base_id="$(podman image inspect --format '{{ .Id }}' "$EE_BASE_IMAGE" 2>/dev/null || true)"
want="$version-${base_id:0:12}"
have="$(podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$EE_IMAGE" 2>/dev/null || true)"
if [[ "${FORCE:-0}" != 1 && "$have" == "$want" ]]; then
    log "$EE_IMAGE is up to date"
    echo "$EE_IMAGE"
    exit 0
fi

# pip and apt inside the build trust what this machine trusts.
ca="${EE_CA_BUNDLE:-}"
if [[ -z "$ca" ]]; then
    for ca in /etc/ssl/certs/ca-certificates.crt /etc/pki/tls/certs/ca-bundle.crt ""; do
        [[ -z "$ca" || -f "$ca" ]] && break
    done
fi
[[ -n "$ca" && -f "$ca" ]] || die "no CA bundle found (looked for /etc/ssl/certs/ca-certificates.crt and
  /etc/pki/tls/certs/ca-bundle.crt); point EE_CA_BUNDLE=/path/to/bundle.pem at the one this machine trusts"
cp "$ca" "$WORK/ca-certificates.crt"

no_cache=()
[[ "${FORCE:-0}" == 1 ]] && no_cache=(--no-cache)
old_id="$(podman image inspect --format '{{ .Id }}' "$EE_IMAGE" 2>/dev/null || true)"
log "building $EE_IMAGE on $EE_BASE_IMAGE (log: ${WORK#"$ROOT"/}/build.log)"
start=$SECONDS
if ! (cd "$ROOT" && "$BUILDER" build --container-runtime podman -f "$DEFINITION" -c "$WORK/context" \
    -t "$EE_IMAGE" --build-arg "EE_BASE_IMAGE=$EE_BASE_IMAGE" \
    --extra-build-cli-args "--label $LABEL=$want" "${no_cache[@]}" -v 2) >"$WORK/build.log" 2>&1; then
    tail -n 40 "$WORK/build.log" >&2
    die "ansible-builder failed (full log: $WORK/build.log)"
fi
# Earlier builds go: the image this tag named before, the same repository under older tags (older
# pins), and the intermediate stages of older builds, which carry the label too (a layer cache
# that no longer matches). The stages of this build stay, to make the next rebuild quicker.
new_id="$(podman image inspect --format '{{ .Id }}' "$EE_IMAGE")"
if [[ -n "$old_id" && "$old_id" != "$new_id" ]]; then
    podman rmi "$old_id" >/dev/null 2>&1 || true
fi
repo="${EE_IMAGE%:*}"
while read -r id name value; do
    [[ "$value" != "$want" && ("$name" == "$repo:"* || "$name" == "<none>:<none>") ]] || continue
    podman rmi "$id" >/dev/null 2>&1 || true
done < <(podman images --filter "label=$LABEL" --format "{{ .ID }} {{ .Repository }}:{{ .Tag }} {{ index .Labels \"$LABEL\" }}")
size="$(podman image inspect --format '{{ .Size }}' "$EE_IMAGE")"
log "built $EE_IMAGE in $((SECONDS - start)) s ($((size / 1024 / 1024)) MiB)"
echo "$EE_IMAGE"
