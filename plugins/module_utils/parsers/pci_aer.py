"""sysfs PCIe AER counters: ``aer_dev_correctable``, ``aer_dev_nonfatal`` and ``aer_dev_fatal``.

Pure parser from the text of ``/sys/bus/pci/devices/<bdf>/aer_dev_<kind>`` (Linux 4.19 and newer,
present on devices whose AER capability the kernel drives). Each file has one ``<Name> <count>``
line per error bit of the AER status register the kernel counts, then a total line::

    RxErr 0
    BadTLP 3
    ...
    TOTAL_ERR_COR 3

(``TOTAL_ERR_NONFATAL`` / ``TOTAL_ERR_FATAL`` in the other two files). The names differ between
kernel versions (newer kernels add ``TLPBlockedErr``, ``PoisonTLPBlocked``...), so they are kept as
printed; a bit the kernel has no name for prints as ``<array>_bit[<n>] <count>`` and is kept so.

Output schema: ``parse_aer_counters(text)`` -> ``AerCounters(counts, total)``: ``counts`` maps each
name to its count (the total line left out); ``total`` is the ``TOTAL_ERR_*`` value, or the sum of
the counts when the kernel printed no total line. Raises ``PciParseError`` for text that is not
such a file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError

AER_KINDS = ("correctable", "nonfatal", "fatal")
# Bits the kernel has no name for print as ``dev_cor_errs_bit[9] 3``.
_LINE_RE = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9_]*(?:\[\d+\])?)\s+(?P<count>\d{1,20})$")
_TOTAL_PREFIX = "TOTAL_ERR_"


@dataclass(frozen=True)
class AerCounters:
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0

    def nonzero(self) -> dict[str, int]:
        return {name: count for name, count in self.counts.items() if count}


def parse_aer_counters(text: str) -> AerCounters:
    """One ``aer_dev_*`` file: ``<Name> <count>`` lines and a ``TOTAL_ERR_*`` line."""
    if not isinstance(text, str):
        raise PciParseError(f"expected the text of an aer_dev_* file, found {type(text).__name__}")
    counts: dict[str, int] = {}
    total: int | None = None
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        raise PciParseError("expected '<Name> <count>' lines (sysfs aer_dev_correctable, aer_dev_nonfatal or "
                            "aer_dev_fatal), found nothing; read the file as the kernel wrote it")
    for number, line in enumerate(lines, 1):
        match = _LINE_RE.match(line)
        if match is None:
            raise PciParseError(f"expected '<Name> <count>' on line {number} of an aer_dev_* file, found "
                                f"{line[:80]!r}; pass /sys/bus/pci/devices/<bdf>/aer_dev_<kind> as the kernel wrote it")
        name, count = match.group("name"), int(match.group("count"))
        if name.startswith(_TOTAL_PREFIX):
            total = count
        else:
            counts[name] = count
    return AerCounters(counts, sum(counts.values()) if total is None else total)
