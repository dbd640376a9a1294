#!/usr/bin/env bash
# Build the collection's tarball from this checkout (galaxy.yml says what it leaves out) into
# .cache/collection/ and print its path.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.cache/collection"
mkdir -p "$OUT"
rm -f "$OUT"/gpuhost-gpu-*.tar.gz
"$ROOT/.venv/bin/ansible-galaxy" collection build --force --output-path "$OUT" "$ROOT" >&2
ls "$OUT"/gpuhost-gpu-*.tar.gz
