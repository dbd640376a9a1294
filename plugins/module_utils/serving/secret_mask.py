"""An API key kept out of messages: the forms it takes in text, their masking, and the keys refused.

Ansible's no_log hides an option's value only where it appears verbatim. A key reaches messages in
other forms too: a Python exception quotes it as a repr (``Invalid header value b'Bearer key\\n'``),
a JSON body escapes it, a URL percent-encodes it. ``mask`` replaces every one of them.

``secret_forms`` is the same function as in roles/sglang_serve/files/sglang_launch.py, which masks
the server's own log on the host (a unit test holds the two equal).
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

PLACEHOLDER = "<api key>"
# Printable ASCII: what an HTTP header carries unchanged (http.client refuses line breaks and
# encodes as Latin-1) and what SGLang's YAML --config file reads back as written.
_PRINTABLE = frozenset(chr(code) for code in range(0x20, 0x7F))


def secret_forms(secret: str) -> list[str]:
    """Every way the secret may be written into a message: as is, and as Python, JSON and URLs escape it.

    The same forms for the secret with surrounding whitespace taken off (a key read with a trailing
    newline is printed both ways). Longest first, so that a longer form is masked whole.
    """
    forms: set[str] = set()
    for text in sorted({secret, secret.strip()}):
        if not text:
            continue
        forms.update((
            text,
            repr(text)[1:-1],
            # The escapes Python writes inside single quotes when the text also holds a double quote.
            repr(text + '"')[1:-2],
            ascii(text)[1:-1],
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
            urllib.parse.quote(text, safe=""),
            urllib.parse.quote_plus(text, safe=""),
            repr(text.encode("utf-8", "surrogatepass"))[2:-1],
        ))
    return sorted((form for form in forms if form), key=lambda form: (-len(form), form))


def mask(text: str, secret: str | None, placeholder: str = PLACEHOLDER) -> str:
    """text with every form of the secret replaced by the placeholder."""
    if not secret:
        return text
    for form in secret_forms(secret):
        text = text.replace(form, placeholder)
    return text


def mask_all(value: Any, secret: str | None, placeholder: str = PLACEHOLDER) -> Any:
    """mask over every string of a JSON-like value; dictionary keys, the result's own names, are left."""
    if isinstance(value, str):
        return mask(value, secret, placeholder)
    if isinstance(value, dict):
        return {k: mask_all(v, secret, placeholder) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_all(item, secret, placeholder) for item in value]
    return value


def api_key_problems(key: Any, min_length: int = 0, max_length: int = 1024) -> list[str]:
    """Why key cannot serve as an API key; empty when it can. No message quotes the key."""
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
