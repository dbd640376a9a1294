"""material/gunzip.py: gzip undone within a limit on decompressed bytes, member by member, damage kept apart."""

from __future__ import annotations

import gzip
import time
import tracemalloc
import zlib

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.capture import build_capture
from ansible_collections.gpuhost.gpu.plugins.module_utils.material.gunzip import MIB, GunzipLimitError, gunzip
from hypothesis import given, settings
from hypothesis import strategies as st


def zeros_gzip(mib: int) -> bytes:
    """``mib`` MiB of zeros gzipped: about a thousandth of that (the issue's 1 MB held 1 GiB)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(MIB)
    return b"".join([*(packer.compress(block) for _ in range(mib)), packer.flush()])


BOMB = zeros_gzip(256)


def test_a_bomb_stops_at_the_limit_with_little_memory_and_time() -> None:
    assert len(BOMB) < MIB // 2
    tracemalloc.start()
    started = time.monotonic()
    try:
        with pytest.raises(GunzipLimitError, match="more than 4 MiB, the limit on decompressed bytes"):
            gunzip(BOMB, 4 * MIB)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Before the limit, all 256 MiB were held (and the 1 GiB took 10.5 GB and 104 s).
    assert peak < 16 * MIB
    assert time.monotonic() - started < 5


def test_exactly_the_limit_is_read_and_one_byte_more_is_not() -> None:
    data = bytes(range(256)) * 4096  # 1 MiB
    packed = gzip.compress(data)
    assert gunzip(packed, len(data)) == (data, True)
    with pytest.raises(GunzipLimitError):
        gunzip(packed, len(data) - 1)


def test_the_limit_counts_every_member_together() -> None:
    member = gzip.compress(bytes(600 * 1024))
    assert gunzip(member, MIB)[0] == bytes(600 * 1024)
    with pytest.raises(GunzipLimitError):
        gunzip(member + member, MIB)


def test_the_bundle_lists_a_bomb_as_unmapped_with_the_limit_and_reads_the_rest() -> None:
    capture = build_capture([("bomb.log.gz", BOMB), ("cmdline", b"BOOT_IMAGE=/vmlinuz intel_iommu=on\n")],
                            max_decompressed=8 * MIB)
    unmapped = {entry["name"]: entry["why"] for entry in capture["from_material"]["unmapped"]}
    assert unmapped["bomb.log.gz"].startswith("gzip data that decompresses to more than 8 MiB, the limit")
    assert capture["from_material"]["inputs"][0] == {"name": "bomb.log.gz", "kind": None, "gzip": True,
                                                     "truncated": False, "as": []}


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=4096), st.integers(min_value=0, max_value=8192), st.integers(min_value=0, max_value=64))
def test_any_cut_of_a_stream_gives_its_prefix_or_the_limit_error(data: bytes, limit: int, cut: int) -> None:
    packed = gzip.compress(data)
    stream = packed[:max(2, len(packed) - cut)]
    try:
        out, whole = gunzip(stream, limit)
    except GunzipLimitError as exc:
        assert exc.limit == limit and len(data) > limit
        return
    assert data.startswith(out) and len(out) <= limit
    if cut == 0:
        assert (out, whole) == (data, True)
    else:
        assert not whole
