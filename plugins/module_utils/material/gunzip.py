"""gzip undone in a bounded, streaming way, for material that may be hostile.

A gzip stream expands up to about a thousand times: 1 MB of gzip can be 1 GiB of zeros. Decompressing it
whole (``gzip.decompress``, or ``decompressobj().decompress(data)`` without a ``max_length``) holds all of it
in memory before anyone can look at its size. Here every call to ``decompress`` is given what is left of
the limit as its ``max_length`` (zlib then keeps the input it did not use in ``unconsumed_tail``), so at
most ``limit`` bytes plus one small piece are ever held, and a stream that would go past the limit stops
with ``GunzipLimitError`` at once.

nvidia-bug-report.sh appends one gzip member per section, so every member is read in turn; a truncated or
damaged stream gives what came before the damage (the caller says it was cut short).
"""

from __future__ import annotations

import zlib

GZIP_MAGIC = b"\x1f\x8b"
MIB = 1 << 20
# A real nvidia-bug-report.log of an 8-GPU host is tens of MiB; 256 MiB leaves room for the largest seen
# while a decompression bomb stops long before it can exhaust a controller or an execution environment.
DEFAULT_MAX_DECOMPRESSED = 256 * MIB
# Small pieces of input, so that damage late in a stream keeps what came before it.
_CHUNK = 1 << 10


class GunzipLimitError(ValueError):
    """The stream decompresses to more than the limit; nothing of it is returned."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"gzip data that decompresses to more than {limit_text(limit)}, the limit on "
                         "decompressed bytes: not read")


def limit_text(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit % MIB == 0 else f"{limit} bytes"


def gunzip(data: bytes, limit: int = DEFAULT_MAX_DECOMPRESSED) -> tuple[bytes, bool]:
    """The bytes of every gzip member in ``data`` and whether the stream was whole; ``GunzipLimitError``
    as soon as more than ``limit`` bytes would come out."""
    out: list[bytes] = []
    size = 0
    rest = data
    while rest[:2] == GZIP_MAGIC:
        member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        start = 0
        pending = b""  # input zlib took but has not turned into output yet (max_length reached)
        while not member.eof and (pending or start < len(rest)):
            if not pending:
                pending = rest[start:start + _CHUNK]
                start += _CHUNK
            try:
                # One byte past the limit tells "exactly at the limit" from "past it".
                piece = member.decompress(pending, limit - size + 1)
            except zlib.error:
                return b"".join(out), False
            size += len(piece)
            if size > limit:
                raise GunzipLimitError(limit)
            out.append(piece)
            pending = member.unconsumed_tail
        if not member.eof:
            piece = member.flush()
            if size + len(piece) > limit:
                raise GunzipLimitError(limit)
            out.append(piece)
            return b"".join(out), False
        # What the member did not use of its last piece, and the pieces after it: the next member.
        rest = member.unused_data + rest[start:]
    return b"".join(out), not rest.strip(b"\x00")
