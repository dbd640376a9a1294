"""Plain values read from data of any shape: Ansible variables, JSON reports, module results.

A missing key, a wrong type or an unreadable value reads as empty or ``None``, never an exception,
so that a judgement can always say what it could not read. One copy for every package: the layers
above import these instead of keeping their own.
"""

from __future__ import annotations

import math
import re
from typing import Any


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def as_number(value: Any) -> float | None:
    """A finite number from an int, a float or a numeric string (Jinja templating yields strings)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def as_text(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None
