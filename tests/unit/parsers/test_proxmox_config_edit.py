"""Changes written into a qemu-server config's text: what they change parses back, the rest stays byte for byte.

Real-format fixtures (tests/fixtures/proxmox/, sources in its SOURCES.md) and generated configs with
comments, descriptions, odd spacing, CRLF, unreadable lines, [PENDING], snapshot and special sections.
"""

from __future__ import annotations

import re

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import SECTION, parse_vm_config
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config_edit import (
    EditError,
    apply_to_text,
    fold_pending,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests import paths

FIXTURES = paths.FIXTURES / "proxmox"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_bytes().decode("utf-8")


def expected_effective(text: str, changes: dict[str, str | None]) -> dict[str, str]:
    options = parse_vm_config(text).effective()
    for key, value in changes.items():
        if value is None:
            options.pop(key, None)
        else:
            options[key] = value
    return options


KEY_LINE = re.compile(r"^(?P<key>[a-z][a-z_\-]*\d*):")


def untouched(text: str, keys: set[str]) -> list[str]:
    """The lines an edit of ``keys`` must leave alone, in order: all but those keys' lines in the current
    config and [PENDING], the [PENDING] header, its delete lines and blank lines."""
    kept, region = [], "current"
    for raw in text.split("\n"):
        line = raw.rstrip("\r")
        header = SECTION.match(line)
        if header:
            region = "pending" if header.group("name").upper() == "PENDING" else "other"
            if region == "pending":
                continue
        elif not line.strip():
            continue
        elif region != "other":
            match = KEY_LINE.match(line)
            if (match and match.group("key") in keys) or (region == "pending" and line.startswith("delete:")):
                continue
        kept.append(raw)
    return kept


def assert_kept(text: str, out: str, keys: set[str]) -> None:
    before, after = untouched(text, keys), untouched(out, keys)
    if before and not text.endswith("\n") and len(after) == len(before) and after[-1] == before[-1] + "\r":
        after[-1] = before[-1]  # a last line without a line end gets the file's CRLF when a line follows it
    assert after == before


# ---------------------------------------------------------------------------
# The fixtures


def test_crlf_odd_spacing_pending_and_sections_survive() -> None:
    text = fixture("odd-spacing-crlf-pending-cloudinit.conf")
    out = apply_to_text(text, {"numa": "1", "balloon": "0", "cpu": "host", "args": None})
    assert "balloon: 0\r\nbios:   ovmf\r\n" in out  # sorted in before bios, with the file's CRLF
    assert "cpu: host\r\n" in out and "args:" not in out
    assert "\r\n[PENDING]\r\ndelete: !hugepages\r\n\r\n[special:cloudinit]\r\n" in out  # numa left the deletions
    assert "hostpci0:\t0000:41:00.0,pcie=1   \r\n" in out and "Hostpci2: 0000:43:00.0,pcie=1\r\n" in out
    assert "\r\n[bad section!]\r\nhostpci9: 0000:99:00.0\r\n" in out
    assert untouched(out, {"numa", "balloon", "cpu", "args"}) == untouched(text, {"numa", "balloon", "cpu", "args"})
    assert parse_vm_config(out).effective() == expected_effective(text, {"numa": "1", "balloon": "0", "cpu": "host",
                                                                         "args": None})


def test_pending_mode_stages_like_qm_set_on_a_running_vm() -> None:
    text = fixture("q35-8gpu-clique-ok_pve8.3.conf")
    out = apply_to_text(text, {"cpu": "host,hidden=1", "balloon": None, "numa": "1", "hugepages": "2"},
                        pending=True)
    config = parse_vm_config(out)
    assert config.current.options == parse_vm_config(text).current.options
    # numa is 1 already: qemu-server drops a pending value equal to the current one.
    assert config.pending.options == {"cpu": "host,hidden=1", "hugepages": "2"}
    assert config.pending_delete == ["balloon"]
    assert out.startswith(text.split("\n[before-driver-580]")[0].rstrip("\n") + "\n\n[PENDING]\n")
    assert config.snapshots == parse_vm_config(text).snapshots
    assert fold_pending(out) == apply_to_text(text, {"cpu": "host,hidden=1", "balloon": None, "hugepages": "2"})


def test_fold_pending_removes_the_emptied_section() -> None:
    text = "cores: 8\nnuma: 0\n\n[PENDING]\nballoon: 8192\ndelete: numa\n\n[snap]\ncores: 4\n"
    assert fold_pending(text) == "balloon: 8192\ncores: 8\n\n[snap]\ncores: 4\n"
    assert fold_pending("cores: 8\n") == "cores: 8\n"


def test_a_new_pending_section_goes_after_the_current_config() -> None:
    assert apply_to_text("cores: 8", {"numa": "1"}, pending=True) == "cores: 8\n\n[PENDING]\nnuma: 1"
    assert apply_to_text("[snap]\ncores: 4\n", {"numa": "1"}, pending=True) == \
        "[PENDING]\nnuma: 1\n\n[snap]\ncores: 4\n"
    assert apply_to_text("", {"numa": "1"}) == "numa: 1\n"


def test_duplicates_the_last_counts_and_delete_takes_all() -> None:
    text = "numa: 0\ncores: 8\nnuma: 1\n"
    assert apply_to_text(text, {"numa": "0"}) == "numa: 0\ncores: 8\nnuma: 0\n"
    assert apply_to_text(text, {"numa": None}) == "cores: 8\n"


@pytest.mark.parametrize("changes", [{"Numa": "1"}, {"description": "x"}, {"delete": "x"}, {"cpu": ""},
                                     {"cpu": " host"}, {"args": "a\nb"}, {"cpu": 1}])
def test_refuses_what_one_line_cannot_hold(changes: dict) -> None:
    with pytest.raises(EditError, match="expected"):
        apply_to_text("cores: 8\n", changes)


# ---------------------------------------------------------------------------
# Properties over generated configs

KEYS = ["args", "balloon", "cpu", "hostpci0", "hostpci1", "machine", "numa", "zz-last"]
VALUE = st.text(alphabet="abcdefgh0123456789=,;:.-_+ '\"", min_size=1, max_size=20).map(str.strip).filter(bool)
SEPARATOR = st.sampled_from([": ", ":", ":\t", ":   "])


@st.composite
def key_lines(draw: st.DrawFn, keys: list[str]) -> list[str]:
    lines = []
    for key in draw(st.lists(st.sampled_from(keys), max_size=6)):
        lines.append(f"{key}{draw(SEPARATOR)}{draw(VALUE)}{draw(st.sampled_from(['', ' ', '  ']))}")
    return lines


@st.composite
def configs(draw: st.DrawFn) -> str:
    lines = [f"#{draw(VALUE)}" for _ in range(draw(st.integers(0, 2)))]
    body = draw(key_lines([*KEYS, "cores", "name"]))
    odd = draw(st.lists(st.sampled_from(["this is not a setting", "  numa: 1", "Hostpci2: 41:00.0",
                                         "description: a%20b", "delete: numa"]), max_size=2))
    for line in odd:
        body.insert(draw(st.integers(0, len(body))), line)
    lines += body
    if draw(st.booleans()):
        lines += ["", "[PENDING]", *draw(key_lines(KEYS))]
        if draw(st.booleans()):
            lines.append("delete: " + ",".join(draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=3))))
    if draw(st.booleans()):
        lines += ["", "[snap-1]", "#before the change", *draw(key_lines(KEYS))]
    if draw(st.booleans()):
        lines += ["", "[special:cloudinit]", "ciuser: ubuntu"]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    return eol.join(lines) + draw(st.sampled_from([eol, ""]))


CHANGES = st.dictionaries(st.sampled_from(KEYS), st.one_of(st.none(), VALUE), min_size=1, max_size=4)


@settings(max_examples=150, deadline=None)
@given(configs(), CHANGES, st.booleans())
def test_written_changes_parse_back_and_nothing_else_moves(text: str, changes: dict, pending: bool) -> None:
    out = apply_to_text(text, changes, pending=pending)
    before, after = parse_vm_config(text), parse_vm_config(out)
    assert after.effective() == expected_effective(text, changes)
    assert after.snapshots == before.snapshots and after.special == before.special
    assert after.description == before.description
    if pending:
        assert after.current.options == before.current.options
    else:
        assert {k: after.current.options.get(k) for k in changes} == changes | {
            k: None for k, v in changes.items() if v is None}
    assert_kept(text, out, set(changes))
    if "\r\n" in text and text.count("\r\n") * 2 > text.count("\n"):
        assert "\n" not in out.replace("\r\n", "")  # new lines took the file's CRLF


@settings(max_examples=100, deadline=None)
@given(configs(), CHANGES, st.booleans())
def test_applying_twice_equals_applying_once(text: str, changes: dict, pending: bool) -> None:
    once = apply_to_text(text, changes, pending=pending)
    assert apply_to_text(once, changes, pending=pending) == once


@settings(max_examples=100, deadline=None)
@given(configs())
def test_folding_pending_gives_the_effective_config(text: str) -> None:
    folded = parse_vm_config(fold_pending(text))
    assert folded.current.options == parse_vm_config(text).effective()
    assert not folded.pending.options and not folded.pending_delete
