"""Two settings of APT's configuration that decide whether unattended-upgrades may move the driver.

- ``APT::Periodic::Unattended-Upgrade "1";`` (written to /etc/apt/apt.conf.d/20auto-upgrades by
  ``dpkg-reconfigure unattended-upgrades``): an interval in days; apt's daily job (apt.systemd.daily)
  runs unattended-upgrade when it is above 0, or ``always``. APT reads the files of apt.conf.d in
  lexical order and a later assignment wins, so ``periodic_unattended_upgrade`` takes the texts in that
  order (apt.conf.d's files, then /etc/apt/apt.conf) and returns the last value set: True, False when it
  is 0 or no text sets it (apt.systemd.daily's default is 0), None when the value is neither a number
  nor ``always``.
- ``Unattended-Upgrade::Package-Blacklist { "nvidia-"; ... };`` (50unattended-upgrades): Python regular
  expressions matched at the start of each package name ("The following matches all packages starting
  with linux-", the comment of the default file); ``package_blacklist`` returns them, comments removed.

Only the flat ``A::B::C "v";`` spelling is read; a text that sets ``Unattended-Upgrade "v";`` inside a
block (``APT { Periodic { Unattended-Upgrade "1"; }; };``) makes the setting unknown (None), not off.
Nothing here raises.
"""

from __future__ import annotations

import re

UNATTENDED = re.compile(r'(?m)^\s*APT::Periodic::Unattended-Upgrade\s+"(?P<value>[^"]*)"\s*;')
BLACKLIST = re.compile(r"Unattended-Upgrade::Package-Blacklist\s*\{(?P<body>.*?)\}\s*;", re.DOTALL)
QUOTED = re.compile(r'"(?P<value>[^"]*)"')
# The key set relative to an enclosing block: the nested spelling, which this reader does not follow.
NESTED = re.compile(r'(?m)^\s*Unattended-Upgrade\s+"')


def _without_comments(text: str) -> str:
    # apt.conf comments: // to the end of the line, /* ... */ blocks (apt.conf(5)).
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def _interval(word: str) -> bool | None:
    word = word.strip().lower()
    if word == "always":
        return True
    return int(word) > 0 if word.isdigit() else None


def periodic_unattended_upgrade(texts: list[str]) -> bool | None:
    value: bool | None = False
    for text in texts:
        plain = _without_comments(text or "")
        if NESTED.search(plain):
            return None
        for match in UNATTENDED.finditer(plain):
            value = _interval(match.group("value"))
    return value


def package_blacklist(texts: list[str]) -> list[str]:
    found: list[str] = []
    for text in texts:
        for block in BLACKLIST.finditer(_without_comments(text or "")):
            found.extend(m.group("value") for m in QUOTED.finditer(block.group("body")) if m.group("value"))
    return found
