"""The GPU code inside a shared library: which architectures its .nv_fatbin section holds.

A CUDA fatbinary is a header (magic 0xBA55ED50, header size, payload size) followed by entries,
each with its kind (1: PTX, 2: ELF cubin) and the SM version it was built for (120 for sm_120).
Reading it needs no CUDA tool, so the same check runs on a host with no toolkit at all.
"""

from __future__ import annotations

import struct

FATBIN_MAGIC = 0xBA55ED50
KIND = {1: "ptx", 2: "elf"}


def sections(data: bytes) -> dict[str, bytes]:
    """The sections of a 64-bit little-endian ELF file, by name."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit little-endian ELF file"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + index * shentsize) for index in range(shnum)]
    names_at = headers[shstrndx][4]
    found = {}
    for name, _type, _flags, _addr, offset, size in headers:
        end = data.index(b"\0", names_at + name)
        found[data[names_at + name:end].decode()] = data[offset:offset + size]
    return found


def fatbin_entries(data: bytes) -> list[tuple[str, int]]:
    """(kind, SM version) of every entry in the library's fatbinaries."""
    blob = sections(data)[".nv_fatbin"]
    entries, position = [], 0
    while position + 16 <= len(blob):
        magic, _version, header_size, payload_size = struct.unpack_from("<IHHQ", blob, position)
        if magic != FATBIN_MAGIC:
            break
        entry, end = position + header_size, position + header_size + payload_size
        while entry < end:
            kind, _entry_version, entry_header_size, padded_size = struct.unpack_from("<HHIQ", blob, entry)
            (sm,) = struct.unpack_from("<I", blob, entry + 28)
            entries.append((KIND.get(kind, str(kind)), sm))
            entry += entry_header_size + padded_size
        position = end
    return entries
