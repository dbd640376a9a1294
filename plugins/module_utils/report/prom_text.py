"""Prometheus' text exposition format (version 0.0.4), written and read back, for node_exporter's textfile collector.

Writing: each family is ``# HELP``, ``# TYPE`` and its samples; families sorted by name, samples by their
labels, so that the same values give the same bytes. Label values are escaped as the format says (backslash,
double quote and line feed); a HELP text escapes backslash and line feed. No sample carries a timestamp:
node_exporter refuses textfiles whose samples do (the time of the audit is a series of its own). A family with
no sample is left out, and so is a value that is not a finite number: what is not known is absent.

Reading back (``same_except``): whether two textfiles this module wrote differ in anything but some series (a
heartbeat), so that a writer can tell a change from a new time stamp. It reads this module's output, not every
textfile.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
TYPES = ("gauge", "counter", "untyped")


class ExpositionError(ValueError):
    """A family this module would write wrongly: a bad name, or two samples with the same labels."""


def escape_label_value(value: object) -> str:
    """A label value as the text format writes it between double quotes.

    A string that is not valid UTF-8 (a lone surrogate) gets U+FFFD in its place: the format is UTF-8.
    """
    text = str(value).encode("utf-8", "replace").decode("utf-8")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text: str) -> str:
    return text.encode("utf-8", "replace").decode("utf-8").replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value: float | int) -> str | None:
    """The sample value as written; None for a value that is not a finite number (left out: not known)."""
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)
    return None


@dataclass
class Family:
    """One metric family: its samples keyed by their label set (name -> value, sorted when written)."""

    name: str
    help: str
    type: str = "gauge"
    samples: dict[tuple[tuple[str, str], ...], float | int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not METRIC_NAME.match(self.name):
            raise ExpositionError(f"metric name {self.name!r} does not match {METRIC_NAME.pattern}")
        if self.type not in TYPES:
            raise ExpositionError(f"metric type {self.type!r} of {self.name} is not one of {', '.join(TYPES)}")

    def add(self, value: float | int | None, labels: Mapping[str, object] | None = None) -> None:
        """Add a sample; a value of None (not known) adds nothing."""
        if value is None:
            return
        key = tuple(sorted((str(k), str(v)) for k, v in (labels or {}).items()))
        bad = [k for k, _unused in key if not LABEL_NAME.match(k) or k.startswith("__")]
        if bad:
            raise ExpositionError(f"label name(s) {', '.join(bad)} of {self.name} are not valid label names")
        if key in self.samples:
            raise ExpositionError(f"{self.name} has two samples with the labels {dict(key)}")
        self.samples[key] = value


def render(families: Iterable[Family]) -> str:
    """The textfile: families sorted by name, samples by labels; families without a known sample left out."""
    out: list[str] = []
    seen: set[str] = set()
    for family in sorted(families, key=lambda f: f.name):
        if family.name in seen:
            raise ExpositionError(f"two families are named {family.name}")
        seen.add(family.name)
        lines = []
        for key in sorted(family.samples):
            value = format_value(family.samples[key])
            if value is None:
                continue
            labels = ",".join(f'{k}="{escape_label_value(v)}"' for k, v in key)
            lines.append(f"{family.name}{{{labels}}} {value}" if labels else f"{family.name} {value}")
        if lines:
            out += [f"# HELP {family.name} {escape_help(family.help)}", f"# TYPE {family.name} {family.type}", *lines]
    return "\n".join(out) + "\n" if out else ""


def same_except(before: str, after: str, ignored: Iterable[str]) -> bool:
    """Whether two textfiles hold the same samples once the samples of the ``ignored`` metrics are set aside
    (their HELP and TYPE lines still count, so that renaming or retyping them is a change)."""
    skip = set(ignored)

    def kept(text: str) -> list[str]:
        return [line for line in text.splitlines()
                if line.lstrip().startswith("#") or sample_name(line) not in skip]

    return kept(before) == kept(after)


def sample_name(line: str) -> str | None:
    match = re.match(r"\s*([^\s{#]+)", line)
    return match.group(1) if match else None
