"""File names as a report can show them.

Linux file names are bytes; Python hands a name that is not UTF-8 over with its bad bytes as lone surrogates
(``surrogateescape``), which no UTF-8 writer accepts: one such name in a directory of pastes stopped the
reports of every input. A name is shown with its bad bytes escaped (``caf\\xe9.txt``); the file itself is read
by its real name.
"""

from __future__ import annotations

import os


def printable(name: str) -> str:
    """``name`` itself when it is valid text, else with each byte that is not UTF-8 written as ``\\xNN``."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return os.fsencode(name).decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # a surrogate that is no escaped byte
            return name.encode("utf-8", "backslashreplace").decode("ascii")
    return name
