"""Debian package states, from ``dpkg -l`` as people paste it and from the audit's own ``dpkg-query -W``.

``dpkg -l`` prints, after its header, one line per package::

    hi  nvidia-driver-510   510.108.03-0ubuntu1   amd64   NVIDIA driver metapackage

The first letter is the selection (what the administrator wants: ``u`` unknown, ``i`` install, ``h`` hold,
``r`` remove, ``p`` purge), the second the state (``n`` not installed, ``i`` installed, ``c`` config files
only, ``U``/``F``/``H``/``W``/``t`` half-way), an optional third the error flag (``R``). ``apt-mark hold``
sets the selection to ``h``: ``hi`` is a held, installed package, and ``apt``/unattended-upgrades leave it
at its version. The audit asks ``dpkg-query -W -f='${db:Status-Abbrev}\\t${binary:Package}\\t${Version}\\n'``,
which writes the same three letters (dpkg-query(1), db:Status-Abbrev) without ``dpkg -l``'s truncation to
the terminal's width. ``binary:Package`` carries ``:amd64`` on multi-arch packages; ``name`` keeps it,
``base`` drops it.

Lines that are not a package line (the header, ``dpkg-query: no packages found matching ...``, a
``grep`` prefix) are skipped; nothing here raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

LINE = re.compile(r"^(?P<want>[uihrp])(?P<state>[ncHUFWti])(?P<err>[ R]?)\s+"
                  r"(?P<name>[a-z0-9][a-z0-9+.\-]*(?::[a-z0-9\-]+)?)\s+(?P<version>\S+)")


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    want: str  # the selection letter: u, i, h, r, p
    state: str  # the state letter: n, c, H, U, F, W, t, i

    @property
    def base(self) -> str:
        return self.name.split(":", 1)[0]

    @property
    def installed(self) -> bool:
        return self.state == "i"

    @property
    def held(self) -> bool:
        return self.want == "h"


def parse_dpkg_list(text: str) -> list[Package]:
    if not isinstance(text, str):
        return []
    found = []
    for line in text.splitlines():
        match = LINE.match(line.strip("\r"))
        if match:
            found.append(Package(match.group("name"), match.group("version"), match.group("want"),
                                 match.group("state")))
    return found
