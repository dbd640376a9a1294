"""XML read the one safe way the parsers share (nvidia-smi -q -x, NCCL's topology dump).

The standard library's ElementTree, never anything that fetches or expands: a document that declares
entities or carries an internal DTD subset is refused before parsing (no entity expansion, the "billion
laughs"), and an external DTD is never read. The pull parser attaches each element to its parent as it
starts, so a document cut short still gives the elements it holds, and the caller learns it was cut.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

_ENTITY_RE = re.compile(r"<!ENTITY", re.IGNORECASE)
_INTERNAL_SUBSET_RE = re.compile(r"<!DOCTYPE[^>]*\[", re.IGNORECASE)


def refused_declaration(document: str) -> str | None:
    """What makes the document unsafe to parse (``<!ENTITY`` or a DOCTYPE with an internal subset), quoted
    from where it starts; None when it has neither."""
    for pattern in (_ENTITY_RE, _INTERNAL_SUBSET_RE):
        match = pattern.search(document)
        if match:
            return document[match.start():match.start() + 80]
    return None


def pull_parse(document: str) -> tuple[ET.Element | None, ET.ParseError | None]:
    """The root element (None when not even one element started) and the error that stopped the parse (None
    for a whole document). The caller refuses unsafe declarations first (``refused_declaration``)."""
    parser = ET.XMLPullParser(events=("start",))
    root: ET.Element | None = None
    error: ET.ParseError | None = None
    try:
        parser.feed(document)
        parser.close()
    except ET.ParseError as exc:
        error = exc
    try:
        for _event, element in parser.read_events():
            if root is None:
                root = element
    except ET.ParseError as exc:
        error = error or exc
    return root, error
