"""A strict reader of Prometheus' text exposition format (0.0.4), for the tests of report/prometheus.py.

Written from the format's rules, not from the writer: a line is blank, a comment (``# HELP name text``,
``# TYPE name type`` or any other comment), or a sample ``name{label="value",...} value``; label values escape
only backslash, double quote and line feed; every sample's family has one HELP and one TYPE before its samples;
no label set repeats within a family. Anything else raises ``ValueError`` naming the line.
"""

from __future__ import annotations

import math
import re

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
HELP = re.compile(rf"^# HELP ({NAME}) (.*)$")
TYPE = re.compile(rf"^# TYPE ({NAME}) (counter|gauge|histogram|summary|untyped)$")
SAMPLE_START = re.compile(rf"^({NAME})")
ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _labels(text: str, line: str) -> tuple[tuple[tuple[str, str], ...], str]:
    """The label set at the start of ``text`` (after the "{"), and the rest of the line."""
    labels: list[tuple[str, str]] = []
    pos = 0
    while True:
        if text[pos:pos + 1] == "}":
            return tuple(sorted(labels)), text[pos + 1:]
        match = re.compile(rf"({LABEL})=\"").match(text, pos)
        if not match:
            raise ValueError(f"bad label at {text[pos:]!r} in {line!r}")
        pos, value = match.end(), []
        while True:
            if pos >= len(text):
                raise ValueError(f"unterminated label value in {line!r}")
            char = text[pos]
            if char == "\\":
                escaped = text[pos + 1:pos + 2]
                if escaped not in ESCAPES:
                    raise ValueError(f"bad escape \\{escaped} in {line!r}")
                value.append(ESCAPES[escaped])
                pos += 2
            elif char == '"':
                pos += 1
                break
            elif char == "\n":
                raise ValueError(f"raw line feed in a label value of {line!r}")
            else:
                value.append(char)
                pos += 1
        if match.group(1) in dict(labels):
            raise ValueError(f"label {match.group(1)} twice in {line!r}")
        labels.append((match.group(1), "".join(value)))
        if text[pos:pos + 1] == ",":
            pos += 1


def parse(text: str) -> tuple[Samples, dict[str, str], dict[str, str]]:
    """(samples by (name, labels), HELP by name, TYPE by name)."""
    samples: Samples = {}
    helps: dict[str, str] = {}
    types: dict[str, str] = {}
    if text and not text.endswith("\n"):
        raise ValueError("the last line has no line feed")
    for line in text.split("\n")[:-1] if text else []:
        if not line:
            continue
        if line.startswith("#"):
            help_match, type_match = HELP.match(line), TYPE.match(line)
            if help_match:
                if help_match.group(1) in helps:
                    raise ValueError(f"second HELP for {help_match.group(1)}")
                helps[help_match.group(1)] = help_match.group(2)
            elif type_match:
                if type_match.group(1) in types:
                    raise ValueError(f"second TYPE for {type_match.group(1)}")
                types[type_match.group(1)] = type_match.group(2)
            continue
        start = SAMPLE_START.match(line)
        if not start:
            raise ValueError(f"not a sample: {line!r}")
        name, rest = start.group(1), line[start.end():]
        labels: tuple[tuple[str, str], ...] = ()
        if rest.startswith("{"):
            labels, rest = _labels(rest[1:], line)
        parts = rest.split(" ")
        if len(parts) != 2 or parts[0] != "":
            raise ValueError(f"expected one space and a value (no time stamp) in {line!r}")
        value = float(parts[1])
        if not math.isfinite(value):
            raise ValueError(f"non-finite value in {line!r}")
        if name not in types or name not in helps:
            raise ValueError(f"sample of {name} before its HELP and TYPE")
        if (name, labels) in samples:
            raise ValueError(f"{name}{dict(labels)} twice")
        samples[(name, labels)] = value
    return samples, helps, types


def value(samples: Samples, name: str, **labels: object) -> float | None:
    return samples.get((name, tuple(sorted((k, str(v)) for k, v in labels.items()))))


def series(samples: Samples, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: v for (n, labels), v in samples.items() if n == name}
