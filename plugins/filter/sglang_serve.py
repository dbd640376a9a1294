"""Filters of the sglang_serve role: values made safe to write into a systemd unit, and the API key checked and masked.

A value interpolated raw into a unit file can end a line and start another: an extra argument
ending in a newline becomes an ``ExecStartPre=+`` line that runs as root. So every value the
templates write is checked first (``sglang_serve_value_problems``: no control character anywhere,
and a shape per setting), and ExecStart's arguments are quoted by systemd's own rules
(``sglang_serve_exec_arg``).

The key's forms come from roles/sglang_serve/files/sglang_launch.py, which masks the server's log on the host with
them, so that the role and the launcher mask the same forms.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from collections.abc import Mapping
from pathlib import Path
from typing import Any

PLACEHOLDER = "<api key>"
# Arguments systemd reads as one word with nothing to interpret: written as they are.
_PLAIN = re.compile(r"[A-Za-z0-9_@+=:,./-]+")
# What the unit's paths, accounts, names and addresses may hold: enough for real values, nothing
# systemd would read as a specifier (%), a separator or a quote.
_SHAPES = {
    "path": (re.compile(r"/[A-Za-z0-9._+@,:=/-]*"), "an absolute path of letters, digits and . _ + @ , : = / -"),
    "account": (re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}"),
                "a user or group name (a letter or _, then letters, digits, . _ -; 32 at most)"),
    "unit_name": (re.compile(r"[A-Za-z0-9_.:-]{1,200}"), "a unit name of letters, digits and . _ : -"),
    "address": (re.compile(r"[A-Za-z0-9.:/_-]+"), "an address, a prefix or a keyword as IPAddressAllow= takes them"),
    "env_name": (re.compile(r"[A-Za-z_][A-Za-z0-9_]*"), "an environment variable name ([A-Za-z_][A-Za-z0-9_]*)"),
    "host": (re.compile(r"[A-Za-z0-9.:_-]*"), "a host name or an IPv4 or IPv6 address"),
}
# The shape each setting must have; any setting not named here must only be free of control characters.
SHAPE_OF = {
    "sglang_serve_venv": "path",
    "sglang_serve_config_dir": "path",
    "sglang_serve_env_file": "path",
    "sglang_serve_secret_file": "path",
    "sglang_serve_backup_dir": "path",
    "sglang_serve_nvidia_modprobe": "path",
    "sglang_serve_user": "account",
    "sglang_serve_group": "account",
    "sglang_serve_service_name": "unit_name",
    "sglang_serve_ip_address_allow": "address",
    "sglang_serve_host": "host",
}
# May be empty: no nvidia-modprobe, a wildcard bind.
_EMPTY_ALLOWED = {"sglang_serve_nvidia_modprobe", "sglang_serve_host"}
# The server's environment: its names are checked as names.
ENVIRONMENT = "the environment (the gate's launch.env and sglang_serve_extra_env)"


def _load_launcher() -> Any:
    # The launcher ships with the role that installs it; the collection keeps plugins/ and roles/ side by side.
    path = Path(__file__).resolve().parents[2] / "roles" / "sglang_serve" / "files" / "sglang_launch.py"
    spec = importlib.util.spec_from_file_location("sglang_serve_launch", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LAUNCHER = _load_launcher()


# --------------------------------------------------------------------------------------------------
# systemd's quoting


def _escape(char: str) -> str:
    code = ord(char)
    if code < 0x80:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def exec_arg(value: Any) -> str:
    """One ExecStart= argument, written so that systemd hands the process exactly str(value).

    systemd splits the line into words (double quotes group, C escapes are decoded inside them),
    then expands specifiers (``%%`` is ``%``), then, at exec time, variables (``$$`` is ``$``).
    So: a plain word as it is; anything else in double quotes, with ``\\`` and ``"`` escaped,
    ``%`` and ``$`` doubled, and every character that is not printable (line breaks among them)
    as an escape, so that no line break ever reaches the unit file. NUL and lone surrogates have
    no escape systemd accepts: they raise ValueError.
    """
    text = str(value)
    if _PLAIN.fullmatch(text):
        return text
    out = []
    for char in text:
        if char == "\0" or unicodedata.category(char) == "Cs":
            raise ValueError(f"an ExecStart= argument cannot hold U+{ord(char):04X}: {text!r}")
        if char in '\\"':
            out.append("\\" + char)
        elif char in "%$":
            out.append(char * 2)
        elif not char.isprintable():
            out.append(_escape(char))
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def specifiers(value: Any) -> str:
    """A value for a setting that expands specifiers (Description=): every % taken literally."""
    return str(value).replace("%", "%%")


# --------------------------------------------------------------------------------------------------
# What the templates may write


_CONTROL_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def _controls(text: str) -> list[str]:
    """The control and line-breaking characters in text (Cc, Cf, Zl, Zp, and unassigned or private)."""
    found: list[str] = []
    for char in text:
        code = f"U+{ord(char):04X}"
        if unicodedata.category(char) in _CONTROL_CATEGORIES and code not in found:
            found.append(code)
    return found


def _shown(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _walk(name: str, value: Any) -> list[tuple[str, Any]]:
    """(where, scalar) for every scalar in value, dictionary keys included."""
    if isinstance(value, Mapping):
        found: list[tuple[str, Any]] = []
        for key, item in value.items():
            found.append((f"{name} key {_shown(key)}", key))
            found += _walk(f"{name}[{_shown(key)}]", item)
        return found
    if isinstance(value, list | tuple):
        return [pair for index, item in enumerate(value) for pair in _walk(f"{name}[{index}]", item)]
    return [(name, value)]


def value_problems(values: Mapping[str, Any]) -> list[str]:
    """What is wrong with the values the role writes into the unit and environment files, by setting.

    values maps each setting's name to its value. Every string anywhere in a value must be free of
    control characters; a setting in SHAPE_OF must also have its shape (each item of a list), and
    the names of ENVIRONMENT must be variable names.
    """
    problems = []
    for name, value in values.items():
        for where, scalar in _walk(name, value):
            if scalar is None or isinstance(scalar, bool | int | float):
                continue
            text = str(scalar)
            controls = _controls(text)
            if controls:
                shown = "" if where.endswith(_shown(scalar)) else f": {_shown(text)}"
                problems.append(f"{where} holds control or line-break characters ({', '.join(controls[:5])}){shown}")
                continue
            shape = SHAPE_OF.get(name)
            if shape and not (text == "" and name in _EMPTY_ALLOWED):
                pattern, expected = _SHAPES[shape]
                if not pattern.fullmatch(text):
                    problems.append(f"{where} is {_shown(text)}; expected {expected}")
        if name == ENVIRONMENT and isinstance(value, Mapping):
            pattern, expected = _SHAPES["env_name"]
            problems += [f"{name} name {_shown(key)}: expected {expected}" for key in value
                         if not _controls(str(key)) and not pattern.fullmatch(str(key))]
    return problems


# --------------------------------------------------------------------------------------------------
# The API key


_PRINTABLE = frozenset(chr(code) for code in range(0x20, 0x7F))


def api_key_problems(key: Any, min_length: int = 16, max_length: int = 1024) -> list[str]:
    """Why key cannot serve as the API key; empty when it can. No message quotes the key.

    The same rules as plugins/module_utils/serving/secret_mask.py's api_key_problems, which the
    sglang_smoke module applies (a unit test holds the two equal).
    """
    if key is None:
        return ["expected sglang_serve_api_key (from a vault); none was given"]
    if not isinstance(key, str):
        return [f"expected the API key as a string, found {type(key).__name__}"]
    problems = []
    if key != key.strip():
        problems.append("the key has whitespace at its start or end (a trailing newline, as `echo KEY | "
                        "ansible-vault encrypt_string` and a YAML `|` block leave, is the usual cause): take it off "
                        "(`printf %s KEY | ansible-vault encrypt_string`, or `| trim`)")
    strange = sorted({f"U+{ord(char):04X}" for char in key if char not in _PRINTABLE})
    if strange:
        problems.append(f"the key holds characters outside printable ASCII ({', '.join(strange[:5])}"
                        f"{' ...' if len(strange) > 5 else ''}), which an HTTP Authorization header cannot carry "
                        "as they are: use letters, digits and punctuation")
    if len(key) < min_length or len(key) > max_length:
        problems.append(f"the key is {len(key)} characters long; expected {min_length} to {max_length}")
    return problems


def mask(text: Any, key: Any, placeholder: str = PLACEHOLDER) -> str:
    """text with every form of the key (raw, Python, JSON and URL escaped) replaced by the placeholder."""
    text = str(text)
    if not isinstance(key, str) or not key:
        return text
    for form in _LAUNCHER.secret_forms(key):
        text = text.replace(form, placeholder)
    return text


class FilterModule:
    def filters(self) -> dict[str, Any]:
        return {
            "sglang_serve_exec_arg": exec_arg,
            "sglang_serve_specifiers": specifiers,
            "sglang_serve_value_problems": value_problems,
            "sglang_serve_api_key_problems": api_key_problems,
            "sglang_serve_mask": mask,
        }
