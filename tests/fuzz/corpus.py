"""The real samples the fuzzer mutates: every file under tests/fixtures (tool outputs, bug reports, configs;
the provenance files SOURCES.md aside), and every command output and file text held by the captures of
tests/captures (real hosts' outputs, each a sample of its own)."""

from __future__ import annotations

import json
from functools import cache

from tests.paths import CAPTURES, FIXTURES

# Samples longer than this are cut: a mutation of a multi-megabyte text costs more than it finds, and the cut is a
# mutation of its own (a paste stopped short).
MAX_SAMPLE = 256 * 1024


@cache
def samples() -> tuple[tuple[str, bytes], ...]:
    """(where it came from, its bytes), sorted by origin so that a seed always means the same cases."""
    found: dict[str, bytes] = {}
    for path in sorted(FIXTURES.rglob("*")):
        if path.is_file() and path.name != "SOURCES.md":
            found[str(path.relative_to(FIXTURES))] = path.read_bytes()[:MAX_SAMPLE]
    for path in sorted(CAPTURES.glob("*.json")):
        capture = json.loads(path.read_text())
        for command, result in sorted((capture.get("commands") or {}).items()):
            if isinstance(result, dict) and isinstance(result.get("stdout"), str) and result["stdout"].strip():
                found[f"{path.name}:commands:{command}"] = result["stdout"].encode("utf-8")[:MAX_SAMPLE]
        for name, text in sorted((capture.get("files") or {}).items()):
            if isinstance(text, str) and text.strip():
                found[f"{path.name}:files:{name}"] = text.encode("utf-8")[:MAX_SAMPLE]
    return tuple(sorted(found.items()))
