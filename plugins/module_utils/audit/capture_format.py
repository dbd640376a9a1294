"""What a capture file is: its format tag, how it keeps bytes and commands, and the error it raises.

A capture (written by ``source.LiveSource``, built from material by ``material/capture.py``, redacted by
``capture_privacy``, replayed by ``source.ReplaySource``) is JSON: text stays text, binary goes
base64, and a command's output is keyed by its argv joined with spaces. The modules that write,
redact and read captures all import this one, so none of them imports another for the format.
"""

from __future__ import annotations

import base64
from typing import Any

CAPTURE_FORMAT = "gpuhost-capture/1"


class CaptureError(Exception):
    """A capture file that cannot be used, with what was expected."""


def command_key(argv: list[str]) -> str:
    return " ".join(argv)


def encode_bytes(data: bytes) -> str | dict[str, str]:
    """Text stays text in a capture (readable, diffable); binary goes base64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}
    if "\x00" in text:
        return {"base64": base64.b64encode(data).decode("ascii")}
    return text


def decode_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, dict) and "base64" in value:
        try:
            return base64.b64decode(value["base64"], validate=True)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"bad base64: {exc}") from None
    if isinstance(value, dict) and "hex" in value:
        return bytes.fromhex(str(value["hex"]))
    raise ValueError(f"expected text, {{'base64': ...}} or {{'hex': ...}}, found {type(value).__name__}")
