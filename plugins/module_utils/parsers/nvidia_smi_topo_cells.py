"""The cells of one ``nvidia-smi topo -m`` line when nvidia-smi (or a paste) lost the tab between some.

On hosts with ten or more NICs, nvidia-smi drops the tab between some cells of the matrix, so that a
row holds ``PXBNODE``, ``SYSSYS`` or ``NODE NODE`` where the header names two columns (public reports:
tests/fixtures/nvidia-smi/SOURCES.md). The link labels (``X``, ``NV#``, ``PIX``, ``PXB``, ``PHB``,
``NODE``, ``SYS``, ``SOC``) are a prefix-free set, so a run of them glued together splits one way only;
this module splits such runs and says how far the split row can be trusted. Used by nvidia_smi_topo.

Output: ``split_labels`` (a word as labels, or None); ``split_header_cell`` (device names glued in a
header cell); ``read_links`` -> ``LinkCells``: the labels read in order, how many of them sit in
their true column (``exact``), the cells after them (the attribute cells), and the words split or
not understood; ``repair_links`` turns that into a row's links (None where a NIC cell cannot be
placed) and notes, refusing a GPU row whose GPU columns cannot be placed; ``check_mirror`` refuses a
repaired GPU block that is not symmetric. Errors are ``NvidiaSmiParseError``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.nvidia_smi_common import smi_error

# Labels of drivers of the last decade; NV# stands for NV1..NV99 (no bond has 100 links).
BASE_LABELS = ("X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC")
_NVLINK_PIECE_RE = re.compile(r"NV\d{1,2}")
# A link label as printed: capitals and digits (unknown labels of newer drivers look the same).
LABEL_LIKE_RE = re.compile(r"^[A-Z][A-Z0-9#]{0,15}$")
# Device names that a lost tab glues together in the header: GPU0NIC1, NIC9NIC10.
_DEVICE_RUN_RE = re.compile(r"(?:(?:GPU|NIC)\d{1,4})+")
_DEVICE_PIECE_RE = re.compile(r"(?:GPU|NIC)\d{1,4}")


def split_labels(word: str, labels: Iterable[str] = BASE_LABELS) -> list[str] | None:
    """``PXBNODE`` -> ``["PXB", "NODE"]``; a single label -> itself; None when the word is not a run of
    known labels or splits in more than one way (possible only with legend labels this module does not
    know)."""
    known = sorted(set(labels), key=len, reverse=True)
    ways: dict[int, list[list[str]]] = {len(word): [[]]}
    for start in range(len(word) - 1, -1, -1):
        found: list[list[str]] = []
        pieces = [label for label in known if word.startswith(label, start)]
        nvlink = _NVLINK_PIECE_RE.match(word, start)
        if nvlink:
            # NV1 then 8 is not a split: digits after NV belong to the count.
            end = nvlink.end()
            while end < len(word) and word[end].isdigit():
                end += 1
            if end == nvlink.end():
                pieces.append(nvlink.group(0))
        for piece in pieces:
            for rest in ways.get(start + len(piece), []):
                found.append([piece, *rest])
                if len(found) > 1:
                    break
        if found:
            ways[start] = found[:2]
    result = ways.get(0, [])
    return result[0] if len(result) == 1 and word else None


def _label_prefix(word: str, labels: Iterable[str]) -> tuple[list[str], str]:
    """The longest run of labels at the start of ``word`` that splits one way, and what follows it
    (``SYS0-47`` -> ``["SYS"]``, ``"0-47"``)."""
    for end in range(len(word), 0, -1):
        pieces = split_labels(word[:end], labels)
        if pieces is None:
            continue
        if word[end:end + 1].isdigit() and pieces[-1].startswith("NV"):
            # NV18 then 0-47, or NV1 then 80-47: the digits could belong to either side.
            return [], word
        return pieces, word[end:]
    return [], word


def split_header_cell(cell: str) -> tuple[list[str], str]:
    """Device names at the start of a header cell and what follows them: ``NIC11 NIC12`` ->
    (``[NIC11, NIC12]``, ``""``), ``NIC13CPU Affinity`` -> (``[NIC13]``, ``CPU Affinity``)."""
    devices: list[str] = []
    words = cell.split()
    for position, word in enumerate(words):
        run = _DEVICE_RUN_RE.match(word)
        if not run:
            return devices, " ".join(words[position:])
        devices += _DEVICE_PIECE_RE.findall(run.group(0))
        if run.end() < len(word):
            return devices, " ".join([word[run.end():], *words[position + 1:]])
    return devices, ""


def split_row_label(cells: list[str], devices: list[str]) -> tuple[str, list[str]]:
    """The row's device and the cells after it, when the tab after the device name was lost
    (``NIC10SYS``, ``GPU0  X``)."""
    first = cells[0].split()
    if not first:
        return "", cells[1:]
    word, others = first[0], first[1:]
    if word not in devices:
        for name in sorted(devices, key=len, reverse=True):
            if word.startswith(name) and LABEL_LIKE_RE.match(word[len(name):] or "-") is not None:
                word, others = name, [word[len(name):], *others]
                break
    return word, ([" ".join(others)] if others else []) + cells[1:]


@dataclass
class LinkCells:
    """The link labels of one row as read. ``labels[:exact]`` sit in their true columns; labels from
    ``exact`` on may be shifted (a word that might hold several unknown labels came before them).
    ``tail`` holds the cells after the links; ``split`` the words split into labels, ``unknown`` the
    words that look like labels but are none this parser knows; ``first_change`` the position of the
    first label that came out of a split cell (None: every cell held one label)."""

    labels: list[str]
    exact: int
    tail: list[str]
    split: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    first_change: int | None = None  # the first label read from a split cell

    def complete(self, count: int) -> bool:
        return len(self.labels) == count and self.exact == count


def read_links(cells: list[str], tabbed: bool, count: int, labels: Iterable[str] = BASE_LABELS) -> LinkCells:
    """Read ``count`` link labels from the cells after a row's device name, splitting glued labels.

    The links end at the first empty cell (tabbed output) or the first word that is no label (an
    attribute value such as ``0-47`` or ``N/A``): those and what follows are the tail. When splitting
    every glued word gives too many labels and keeping exactly one of them whole fits the header, that
    word is a label of its own (``XX``) this parser does not know."""
    labels = tuple(labels)
    read = _read_links(cells, tabbed, labels, keep=None)
    if len(read.labels) > count:
        fitting = [ordinal for ordinal, (pieces, _unused) in enumerate(read.glued)
                   if pieces - 1 == len(read.labels) - count]
        if len(fitting) == 1:
            read = _read_links(cells, tabbed, labels, keep=fitting[0])
    if len(read.labels) == count:
        exact = count
    elif len(read.labels) > count:
        exact = 0  # more labels than columns: no way to tell which one does not belong
    elif read.ambiguous_at is not None:
        exact = read.ambiguous_at
    else:
        # Labels are missing, none glued: only a line cut at its end (nothing after it) keeps its order.
        exact = len(read.labels) if not any(cell.strip() for cell in read.tail) else 0
    return LinkCells(read.labels, min(exact, count), read.tail, read.split, read.unknown, read.first_change)


@dataclass
class _Reading:
    labels: list[str] = field(default_factory=list)
    tail: list[str] = field(default_factory=list)
    split: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    glued: list[tuple[int, str]] = field(default_factory=list)  # (labels, word) per word split in labels
    ambiguous_at: int | None = None
    first_change: int | None = None


def _read_links(cells: list[str], tabbed: bool, labels: tuple[str, ...], keep: int | None) -> _Reading:
    """One reading of the link cells; the glued word numbered ``keep`` is left whole."""
    out = _Reading()
    for index, cell in enumerate(cells):
        if tabbed and not cell.strip():
            out.tail = cells[index:]
            break
        words = cell.split() if tabbed else [cell]
        before = len(out.labels)
        stopped = False
        for position, word in enumerate(words):
            if LABEL_LIKE_RE.match(word):
                pieces = split_labels(word, labels)
                if pieces is not None and len(pieces) > 1:
                    out.glued.append((len(pieces), word))
                    if len(out.glued) - 1 == keep:
                        pieces = None
                if pieces is None:
                    # An unknown label, or unknown labels glued: one cell or several, nobody can tell.
                    out.unknown.append(word)
                    out.ambiguous_at = len(out.labels) if out.ambiguous_at is None else out.ambiguous_at
                    out.labels.append(word)
                    continue
                out.labels += pieces
                continue
            pieces, rest = _label_prefix(word, labels)
            out.labels += pieces
            remainder = " ".join([rest, *words[position + 1:]]).strip() if tabbed else rest
            out.tail = ([remainder] if remainder else []) + cells[index + 1:]
            stopped = True
            break
        if len(out.labels) - before > 1:
            out.split.append(cell.strip() if tabbed else cell)
            if out.first_change is None:
                out.first_change = before
        if stopped:
            break
    return out


def check_mirror(gpus: list[str], links: list[list[str | None]], repaired: list[bool]) -> None:
    """A repaired GPU row must agree with the other rows: the GPU block is symmetric. A row a cut paste lost
    (None cells) has nothing to agree with."""
    for i, row in enumerate(links):
        for j, label in enumerate(row):
            if (repaired[i] or repaired[j]) and label != links[j][i] and None not in (label, links[j][i]):
                raise smi_error(
                    f"nvidia-smi topo -m row {gpus[i]}",
                    f"the same label for {gpus[i]}-{gpus[j]} as for {gpus[j]}-{gpus[i]} once merged cells are split",
                    f"{gpus[i]}->{gpus[j]} {label}, {gpus[j]}->{gpus[i]} {links[j][i]}",
                    "The GPU block of this output cannot be read: cells are missing or merged in a way that "
                    "cannot be undone. Run `nvidia-smi topo -m > topo.txt` again, or take the links from NVML "
                    "(gpu_host_facts reads them) or `nvidia-smi topo -p2p n`.")


def repair_links(line: str, label: str, rest: list[str], tabbed: bool, devices: list[str], gpu_count: int,
                 labels: tuple[str, ...], notes: list[str]) -> tuple[list[str | None], list[str]]:
    """The links of a row that does not line up with the header, with merged cells split; NIC cells that
    cannot be placed are None. Refuses a GPU row whose GPU block cannot be read."""
    count = len(devices)
    own = devices.index(label)
    read = read_links(rest, tabbed, count, labels)
    found = (f"{len(read.labels)} link labels for {count} columns"
             + (f"; merged cells {', '.join(map(repr, read.split))} split" if read.split else "")
             + (f"; {', '.join(map(repr, read.unknown))} not a known label" if read.unknown else ""))
    if own < gpu_count and (read.exact < gpu_count or read.labels[own] != "X"):
        where = (f"X in its own column {label}" if read.exact >= gpu_count
                 else f"{count} link labels, the first {gpu_count} (the GPU columns) in place")
        raise smi_error(
            f"nvidia-smi topo -m row {label}", where, line,
            f"Read {found}: the GPU columns of this row cannot be placed. Run `nvidia-smi topo -m > topo.txt` "
            "again (a file keeps the tabs), or take the links from NVML (gpu_host_facts reads them) or "
            "`nvidia-smi topo -p2p n`.")
    if read.exact > own and read.labels[own] != "X":
        notes.append(f"{label}: {found}, and no X in its own column; its links are unknown")
        return [None] * count, [], True
    links: list[str | None] = [read.labels[k] if k < read.exact else None for k in range(count)]
    if read.split:
        notes.append(f"{label}: cells without a tab between them ({', '.join(map(repr, read.split))}) split into "
                     "their labels")
    if read.exact < count:
        notes.append(f"{label}: {found}; the cells for {', '.join(devices[read.exact:])} are unknown")
    touched = read.exact < gpu_count or (read.first_change is not None and read.first_change < gpu_count)
    return links, read.tail, touched


def cut_inside_row(text: object, codes: list[str], width: int, known: object) -> bool:
    """Whether the last line of a pasted matrix is a row the paste stops inside: the text ends without a line
    break and the row is short or its last cell is no status (``N`` of ``NS``, ``G`` of ``GNS``; every
    status's prefixes are none)."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str) or text.rstrip(" \t").endswith(("\n", "\r")):
        return False
    return len(codes) != width or not codes or codes[-1] not in known  # type: ignore[operator]


P2P_STATUS_MEANING = {
    "X": "self",
    "OK": "status OK",
    "CNS": "chipset not supported",
    "GNS": "GPU not supported",
    "TNS": "topology not supported",
    "NS": "not supported",
    "DR": "disabled by regkey",
    "U": "unknown",
}
"""The codes of ``topo -p2p`` as its legend explains them."""

P2P_NVML_STATUS = {
    "OK": "NVML_P2P_STATUS_OK",
    "CNS": "NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED",
    "GNS": "NVML_P2P_STATUS_GPU_NOT_SUPPORTED",
    "TNS": "NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED",
    "NS": "NVML_P2P_STATUS_NOT_SUPPORTED",
    "DR": "NVML_P2P_STATUS_DISABLED_BY_REGKEY",
    "U": "NVML_P2P_STATUS_UNKNOWN",
}
"""The NVML status (nvmlDeviceGetP2PStatus) each code prints."""
