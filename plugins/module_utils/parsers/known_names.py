"""Names a user wrote that are none of the names the code reads, each with the closest one it does.

A misspelled key of a mapping (``weight_gib`` for ``weights_gib``) or a misspelled variable
(``gpu_audit_captur``) is otherwise read as "not given": its default applies and nothing says so.
These helpers turn it into a message naming the closest valid name (``difflib``'s ratio, the
standard library's), or every valid name when none is close. Pure: names in, sentences out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any

# difflib's default cutoff (0.6) misses two-letter slips in short names; below 0.5 suggestions get random.
CUTOFF = 0.5


def closest(name: Any, valid: Iterable[str]) -> str | None:
    """The valid name most like ``name``, or None when none is close enough to suggest."""
    matches = difflib.get_close_matches(str(name), sorted(set(valid)), n=1, cutoff=CUTOFF)
    return matches[0] if matches else None


def unknown_keys(mapping: Mapping[Any, Any], valid: Iterable[str], where: str) -> list[str]:
    """One message per key of ``mapping`` that is not in ``valid``, in the mapping's order.

    ``<where>.<key>: unknown key; did you mean <closest>?``, or, with nothing close, the keys it takes.
    """
    known = sorted(set(valid))
    problems = []
    for key in mapping:
        if isinstance(key, str) and key in known:
            continue
        suggestion = closest(key, known)
        hint = f"did you mean {suggestion}?" if suggestion else f"expected one of {', '.join(known)}"
        problems.append(f"{where}.{key}: unknown key; {hint}")
    return problems


def owner(name: str, prefixes: Iterable[str]) -> str | None:
    """The longest prefix ``name`` starts with (``sglang_serve_`` before ``sglang_``), or None."""
    owners = [p for p in prefixes if name.startswith(p) and len(name) > len(p)]
    return max(owners, key=len) if owners else None


def names_in_text(text: str, prefixes: Iterable[str]) -> set[str]:
    """Every identifier in ``text`` that starts with one of ``prefixes``: the names a role's files use."""
    alternatives = "|".join(re.escape(p) for p in sorted(set(prefixes), key=len, reverse=True))
    if not alternatives:
        return set()
    return set(re.findall(rf"(?<!\w)(?:{alternatives})\w+", text))


def unknown_variables(seen: Iterable[str], owners: Mapping[str, str], known: Iterable[str],
                      documented: Mapping[str, Iterable[str]]) -> list[dict[str, Any]]:
    """Variables that start with an owner's prefix and that nothing reads, each with the closest one.

    ``owners`` maps a prefix (``gpu_audit_``) to what its variables are (``a variable of role gpu_audit``),
    as the message says it; ``known`` is every name the roles and playbooks use; ``documented`` maps a
    prefix to its documented names (the argument spec's options), which suggestions come from first.
    """
    known_names = set(known)
    found = []
    for name in sorted(set(seen)):
        prefix = owner(name, owners)
        if prefix is None or name in known_names:
            continue
        same_prefix = {k for k in known_names if owner(k, owners) == prefix}
        suggestion = _closest_after(prefix, name, documented.get(prefix, ())) or \
            _closest_after(prefix, name, same_prefix)
        listed = sorted(documented.get(prefix, ())) or sorted(same_prefix)
        message = f"{name} is not {owners[prefix]}; " + (
            f"did you mean {suggestion}?" if suggestion else f"expected one of {', '.join(listed)}")
        found.append({"name": name, "owner": owners[prefix], "suggestion": suggestion, "message": message})
    return found


def _closest_after(prefix: str, name: str, valid: Iterable[str]) -> str | None:
    """closest() on what follows the prefix: the prefix they share would make any two names look alike."""
    rest = {v[len(prefix):]: v for v in valid if v.startswith(prefix)}
    match = closest(name[len(prefix):], rest)
    return rest[match] if match is not None else None
