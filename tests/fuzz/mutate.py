"""Seeded mutations of real samples: what a paste goes through (cut short, lines lost, doubled or wrapped,
CRLF, prefixes, bytes damaged, another output spliced in) and what a hostile sender adds (huge or negative
numbers, NaN, control and non-UTF-8 bytes, lone surrogates, markup). One ``random.Random`` drives every
choice, so (seed, case) names one input for good."""

from __future__ import annotations

import random

TOKENS = (
    b"", b"\r\n", b"\r", b"\x00", b"\t", b"\xff\xfe", b"\xe9", b"\xc3", b"\xed\xa0\x80", b"-1", b"0", b"NaN", b"nan",
    b"inf", b"-inf", b"1e308", b"99999999999999999999999999", b"0x", b"N/A", b"[N/A]", b"ERR!", b"Unknown Error",
    b"|", b"||", b":", b"::", b"=", b",", b"{", b"}", b"[", b"]", b"<", b">", b"</", b"<![CDATA[", b"&amp;", b"&#0;",
    b"{{", b"}}", b"%s", b"%0", b"%ff", b"\\", b"\"", b"'", b"#", b"$ ", b"+ ", b"[1,0]<stdout>:", b"GPU0", b"GPU99",
    b"0000:ff:1f.7", b"ffff:ff:ff.f", b"X", b"NV18", b"SYS", b"OK", b"NS", b"     ", b"\n\n\n", b"-" * 80, b"=" * 44,
    b"_" * 44, b"\xe2\x80\xa8", b"\xef\xbb\xbf",
)


def mutate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    """One to four mutations of ``data``; ``other`` is another sample, for splicing."""
    for _ in range(rng.randint(1, 4)):
        data = rng.choice(_MUTATIONS)(rng, data, other)
    return data


def _at(rng: random.Random, data: bytes) -> int:
    return rng.randint(0, len(data))


def _span(rng: random.Random, data: bytes) -> tuple[int, int]:
    start = _at(rng, data)
    return start, min(len(data), start + rng.choice((1, 2, 8, 64, 512, 4096)))


def _flip(rng: random.Random, data: bytes, other: bytes) -> bytes:
    if not data:
        return bytes([rng.randrange(256)])
    at = rng.randrange(len(data))
    return data[:at] + bytes([data[at] ^ (1 << rng.randrange(8))]) + data[at + 1:]


def _insert_token(rng: random.Random, data: bytes, other: bytes) -> bytes:
    at = _at(rng, data)
    return data[:at] + rng.choice(TOKENS) * rng.choice((1, 1, 2, 100)) + data[at:]


def _replace_token(rng: random.Random, data: bytes, other: bytes) -> bytes:
    start, end = _span(rng, data)
    return data[:start] + rng.choice(TOKENS) + data[end:]


def _delete(rng: random.Random, data: bytes, other: bytes) -> bytes:
    start, end = _span(rng, data)
    return data[:start] + data[end:]


def _duplicate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    start, end = _span(rng, data)
    return data[:end] + data[start:end] + data[end:]


def _truncate(rng: random.Random, data: bytes, other: bytes) -> bytes:
    return data[:_at(rng, data)]


def _random_bytes(rng: random.Random, data: bytes, other: bytes) -> bytes:
    at = _at(rng, data)
    return data[:at] + bytes(rng.randrange(256) for _ in range(rng.choice((1, 4, 32)))) + data[at:]


def _splice(rng: random.Random, data: bytes, other: bytes) -> bytes:
    start, end = _span(rng, other)
    at = _at(rng, data)
    return data[:at] + other[start:end] + data[at:]


def _lines(rng: random.Random, data: bytes, other: bytes) -> bytes:
    lines = data.split(b"\n")
    choice = rng.randrange(5)
    if choice == 0:
        rng.shuffle(lines)
    elif choice == 1 and lines:
        del lines[rng.randrange(len(lines))]
    elif choice == 2 and lines:
        at = rng.randrange(len(lines))
        lines.insert(at, lines[at])
    elif choice == 3:
        lines = [line + b"\r" for line in lines]
    else:
        prefix = rng.choice((b"[1,0]<stdout>:", b"> ", b"    ", b"1: ", b"node-3: "))
        lines = [prefix + line for line in lines]
    return b"\n".join(lines)


def _number(rng: random.Random, data: bytes, other: bytes) -> bytes:
    digits = [i for i in range(len(data)) if 48 <= data[i] <= 57]
    if not digits:
        return data
    at = rng.choice(digits)
    return data[:at] + rng.choice((b"-", b"9" * 30, b"0", b".", b"e999", b"-0")) + data[at + 1:]


_MUTATIONS = (_flip, _insert_token, _replace_token, _delete, _duplicate, _truncate, _random_bytes, _splice, _lines,
              _number, _insert_token, _number)


def as_text(rng: random.Random, data: bytes) -> str:
    """The bytes as a parser's caller would hand them: decoded with replacement (material/capture.py's way), or with
    surrogateescape (how Python hands over a non-UTF-8 file name or os.fsdecode'd text), now and then."""
    return data.decode("utf-8", "surrogateescape" if rng.random() < 0.1 else "replace")
