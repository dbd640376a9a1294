"""Version numbers compared as numbers, never as strings.

Driver branches (``580.95.05``), CUDA versions (``12.8``), compute capabilities (``8.9``, ``sm_120``)
and Python package versions (``0.5.6.post2``, ``0.5.10rc1``) all come through here. As strings,
``"570.10" > "580.95.05"`` is false for the wrong reason and ``"12.10" < "12.8"`` is true; as
numbers both are right. Package versions follow PEP 440 ordering: dev < pre-releases (a, b, rc) <
the release < post-releases; a local part (``+cu130``) is ignored.

Pure functions; anything that is not a version parses to ``None`` and never raises.
"""

from __future__ import annotations

import re
from typing import Any

_PEP440 = re.compile(
    r"^\s*v?(?P<release>\d+(?:\.\d+)*)"
    r"(?:[-_.]?(?P<pre_phase>a|alpha|b|beta|c|rc|pre|preview)[-_.]?(?P<pre_num>\d*))?"
    r"(?:(?:-(?P<post_implicit>\d+))|(?:[-_.]?(?:post|rev|r)[-_.]?(?P<post_num>\d*)))?"
    r"(?:[-_.]?dev[-_.]?(?P<dev_num>\d*))?"
    r"(?:\+[a-z0-9.]*)?\s*$",
    re.IGNORECASE,
)
_PRE_RANK = {"a": 0, "alpha": 0, "b": 1, "beta": 1, "c": 2, "rc": 2, "pre": 2, "preview": 2}
_SM = re.compile(r"^\s*sm_?(\d+)[a-z]?\s*$", re.IGNORECASE)
_SPECIFIER = re.compile(r"^\s*(===|==|!=|<=|>=|~=|<|>)?\s*(\S+?)\s*$")


def _text(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        # YAML reads 12.8 as a float; repr keeps what was written for the usual cases.
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        return value
    return None


def release(value: Any) -> tuple[int, ...] | None:
    """The numeric release of a version (``"580.95.05"`` -> (580, 95, 5)), trailing zeros dropped."""
    parsed = parse(value)
    return parsed[0] if parsed else None


def _raw_release(value: str) -> tuple[int, ...] | None:
    match = re.match(r"^\s*v?(\d+(?:\.\d+)*)\s*$", value)
    return tuple(int(part) for part in match.group(1).split(".")) if match else None


def parse(value: Any) -> tuple[Any, ...] | None:
    """A sort key for a version, or None when the value is not one."""
    text = _text(value)
    if text is None:
        return None
    match = _PEP440.match(text)
    if not match:
        return None
    numbers = [int(part) for part in match.group("release").split(".")]
    while len(numbers) > 1 and numbers[-1] == 0:
        numbers.pop()
    pre = None
    if match.group("pre_phase"):
        pre = (_PRE_RANK[match.group("pre_phase").lower()], int(match.group("pre_num") or 0))
    post_text = match.group("post_implicit")
    if post_text is None and match.group("post_num") is not None:
        post_text = match.group("post_num") or "0"
    post = int(post_text) if post_text is not None else None
    dev = int(match.group("dev_num") or 0) if match.group("dev_num") is not None else None
    # A dev release of a final version sorts before its pre-releases; otherwise before what it qualifies.
    if pre is not None:
        pre_key: tuple[int, ...] = (0, *pre)
    elif dev is not None and post is None:
        pre_key = (-1,)
    else:
        pre_key = (1,)
    post_key = (0, post) if post is not None else (-1,)
    dev_key = (0, dev) if dev is not None else (1,)
    return (tuple(numbers), pre_key, post_key, dev_key)


def compare(a: Any, b: Any) -> int | None:
    """-1, 0 or 1 as a is older than, equal to or newer than b; None when either is not a version."""
    key_a, key_b = parse(a), parse(b)
    if key_a is None or key_b is None:
        return None
    return (key_a > key_b) - (key_a < key_b)


def at_least(found: Any, minimum: Any) -> bool | None:
    """found >= minimum; None when either cannot be read."""
    result = compare(found, minimum)
    return None if result is None else result >= 0


def compute_capability(value: Any) -> tuple[int, int] | None:
    """(major, minor) from ``"8.9"``, ``9.0``, ``"12.0"``, ``"sm_120"``, ``"sm_90a"`` or ``"sm89"``."""
    text = _text(value)
    if text is None:
        return None
    sm = _SM.match(text)
    if sm:
        digits = sm.group(1)
        if len(digits) < 2:
            return None
        return int(digits[:-1]), int(digits[-1])
    match = re.match(r"^\s*(\d+)(?:\.(\d+))?\s*$", text)
    if not match:
        return None
    return int(match.group(1)), int(match.group(2) or 0)


def sm_name(value: Any) -> str | None:
    """``sm_120`` from any of the forms compute_capability reads."""
    cc = compute_capability(value)
    return f"sm_{cc[0]}{cc[1]}" if cc else None


def cc_text(cc: tuple[int, int] | None) -> str | None:
    return f"{cc[0]}.{cc[1]}" if cc else None


def matches(version: Any, spec: Any) -> bool | None:
    """Whether a version satisfies a specifier.

    ``spec`` is ``None`` or ``"*"`` (any), a string of comma-separated clauses (``">=0.5.6,<0.5.12"``,
    ``"==0.5.9"``, ``"0.5.*"``, a bare version meaning ``==``), or a list of such strings, any of which may
    match. None when the version or the specifier cannot be read.
    """
    if spec is None:
        return True
    if isinstance(spec, (list, tuple)):
        results = [matches(version, item) for item in spec]
        if any(result is True for result in results):
            return True
        return None if any(result is None for result in results) or not results else False
    text = _text(spec)
    if text is None:
        return None
    if text.strip() in ("", "*"):
        return True
    if parse(version) is None:
        return None
    for clause in text.split(","):
        result = _clause(version, clause)
        if result is not True:
            return result
    return True


def _clause(version: Any, clause: str) -> bool | None:
    match = _SPECIFIER.match(clause)
    if not match:
        return None
    operator, target = match.group(1) or "==", match.group(2)
    if target.endswith(".*"):
        prefix = _raw_release(target[:-2])
        found = parse(version)
        if prefix is None or found is None:
            return None
        padded = found[0] + (0,) * max(0, len(prefix) - len(found[0]))
        same = padded[:len(prefix)] == prefix
        if operator in ("==", "==="):
            return same
        if operator == "!=":
            return not same
        return None
    if operator == "~=":
        # ~=0.5.6 means >=0.5.6 and ==0.5.*
        base = release(target)
        if base is None or len(target.split("+")[0].split(".")) < 2:
            return None
        prefix_parts = target.split(".")[:-1]
        return _clause(version, f">={target}") and _clause(version, "==" + ".".join(prefix_parts) + ".*")
    result = compare(version, target)
    if result is None:
        return None
    return {
        "==": result == 0, "===": result == 0, "!=": result != 0,
        "<": result < 0, "<=": result <= 0, ">": result > 0, ">=": result >= 0,
    }[operator]
