"""The kernel command line edit: the wanted parameters hold once, every other byte stays, a second edit changes
nothing. Real lines (Proxmox VE installer defaults, Debian's, the Proxmox wiki's passthrough examples) and
generated ones with quotes, duplicates, conflicts and ``--``.
"""

from __future__ import annotations

import pytest
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.kernel_cmdline import (
    CmdlineError,
    Rule,
    edit_grub_default,
    edit_kernel_cmdline_file,
    ensure,
    params,
    satisfies,
    words,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.passthrough_host import AMD_CMDLINE, INTEL_CMDLINE
from hypothesis import given, settings
from hypothesis import strategies as st

# Proxmox VE 8's installer writes this /etc/default/grub (comments cut short).
PVE_GRUB = """# If you change this file, run 'update-grub' afterwards to update
# /boot/grub/grub.cfg.

GRUB_DEFAULT=0
GRUB_TIMEOUT=5
GRUB_DISTRIBUTOR=`lsb_release -i -s 2> /dev/null || echo Debian`
GRUB_CMDLINE_LINUX_DEFAULT="quiet"
GRUB_CMDLINE_LINUX=""

# Uncomment to disable graphical terminal (grub-pc only)
#GRUB_TERMINAL=console
"""
# proxmox-boot-tool's /etc/kernel/cmdline on a ZFS root installed by the Proxmox VE installer.
PVE_ZFS_CMDLINE = "root=ZFS=rpool/ROOT/pve-1 boot=zfs\n"


@pytest.mark.parametrize(("line", "expected"), [
    ("quiet", "quiet intel_iommu=on iommu=pt"),
    ("", "intel_iommu=on iommu=pt"),
    ("quiet intel_iommu=on iommu=pt", "quiet intel_iommu=on iommu=pt"),
    ("quiet intel_iommu=off", "quiet intel_iommu=on iommu=pt"),
    ("intel_iommu=off,sm_on quiet", "intel_iommu=on,sm_on quiet iommu=pt"),
    ("intel_iommu=on,sm_on iommu=pt", "intel_iommu=on,sm_on iommu=pt"),
    ("intel_iommu quiet", "intel_iommu=on quiet iommu=pt"),
    ('intel_iommu="on" iommu=pt', 'intel_iommu="on" iommu=pt'),
    ("intel_iommu=on quiet intel_iommu=on iommu=pt", "intel_iommu=on quiet iommu=pt"),
    ("iommu=nopt intel_iommu=on", "iommu=pt intel_iommu=on"),
    ("quiet  splash\t", "quiet  splash intel_iommu=on iommu=pt\t"),
    ('quiet foo="a b" -- single', 'quiet foo="a b" intel_iommu=on iommu=pt -- single'),
    ("quiet -- intel_iommu=off", "quiet intel_iommu=on iommu=pt -- intel_iommu=off"),
])
def test_intel(line, expected):
    assert ensure(line, INTEL_CMDLINE) == expected
    assert ensure(expected, INTEL_CMDLINE) == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("quiet", "quiet iommu=pt"),
    ("quiet amd_iommu=off iommu=pt", "quiet iommu=pt"),
    ("amd_iommu=off quiet", "quiet iommu=pt"),
    ("amd_iommu=off,fullflush quiet", "amd_iommu=fullflush quiet iommu=pt"),
    ("quiet amd_iommu=on iommu=pt", "quiet amd_iommu=on iommu=pt"),  # stated by hand: left alone
])
def test_amd_adds_no_amd_iommu_on(line, expected):
    assert ensure(line, AMD_CMDLINE) == expected


def test_unclosed_quote_is_refused_with_what_to_do():
    with pytest.raises(CmdlineError, match=r"unclosed quote.*close it by hand"):
        ensure('quiet foo="a b', INTEL_CMDLINE)


def test_satisfies_reads_the_running_kernel_as_the_kernel_does():
    assert satisfies("BOOT_IMAGE=/boot/vmlinuz-6.8.12-4-pve root=/dev/mapper/pve-root ro quiet intel_iommu=on iommu=pt",
                     INTEL_CMDLINE)
    assert not satisfies("BOOT_IMAGE=/boot/vmlinuz root=/dev/sda1 ro quiet", INTEL_CMDLINE)
    # Given twice, the last wins in the kernel: off after on is off.
    assert not satisfies("intel_iommu=on intel_iommu=off iommu=pt", INTEL_CMDLINE)
    assert satisfies("root=/dev/sda1 iommu=pt", AMD_CMDLINE)
    assert not satisfies("root=/dev/sda1 iommu=pt amd_iommu=off", AMD_CMDLINE)
    assert not satisfies("root=/dev/sda1 -- iommu=pt", AMD_CMDLINE)


def test_grub_file_of_the_proxmox_installer():
    edit = edit_grub_default(PVE_GRUB, INTEL_CMDLINE)
    assert edit.changed
    assert edit.cmdline_before == "quiet"
    assert edit.cmdline_after == "quiet intel_iommu=on iommu=pt"
    changed = [(a, b) for a, b in zip(PVE_GRUB.split("\n"), edit.text_after.split("\n"), strict=True) if a != b]
    assert changed == [('GRUB_CMDLINE_LINUX_DEFAULT="quiet"',
                        'GRUB_CMDLINE_LINUX_DEFAULT="quiet intel_iommu=on iommu=pt"')]
    assert not edit_grub_default(edit.text_after, INTEL_CMDLINE).changed


@pytest.mark.parametrize(("line", "expected"), [
    ("GRUB_CMDLINE_LINUX_DEFAULT='quiet'", "GRUB_CMDLINE_LINUX_DEFAULT='quiet iommu=pt'"),
    ("GRUB_CMDLINE_LINUX_DEFAULT=quiet", 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt"'),
    ("GRUB_CMDLINE_LINUX_DEFAULT=", "GRUB_CMDLINE_LINUX_DEFAULT=iommu=pt"),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet" # set by hand', 'GRUB_CMDLINE_LINUX_DEFAULT="quiet iommu=pt" # set by hand'),
    ('export GRUB_CMDLINE_LINUX_DEFAULT="$X amd_iommu=off"', 'export GRUB_CMDLINE_LINUX_DEFAULT="$X iommu=pt"'),
    ('GRUB_CMDLINE_LINUX_DEFAULT="quiet foo=\\"a b\\""', 'GRUB_CMDLINE_LINUX_DEFAULT="quiet foo=\\"a b\\" iommu=pt"'),
])
def test_grub_quoting_is_kept(line, expected):
    edit = edit_grub_default(line + "\n", AMD_CMDLINE)
    assert edit.text_after == expected + "\n"
    assert not edit_grub_default(edit.text_after, AMD_CMDLINE).changed


def test_grub_last_assignment_counts_and_commented_ones_do_not():
    text = 'GRUB_CMDLINE_LINUX_DEFAULT="quiet"\n#GRUB_CMDLINE_LINUX_DEFAULT="x"\nGRUB_CMDLINE_LINUX_DEFAULT="splash"\n'
    edit = edit_grub_default(text, AMD_CMDLINE)
    assert edit.text_after == text.replace('"splash"', '"splash iommu=pt"')


def test_grub_without_the_variable_gets_it():
    edit = edit_grub_default("GRUB_TIMEOUT=5", INTEL_CMDLINE)
    assert edit.text_after == 'GRUB_TIMEOUT=5\nGRUB_CMDLINE_LINUX_DEFAULT="intel_iommu=on iommu=pt"\n'


@pytest.mark.parametrize("line", ['GRUB_CMDLINE_LINUX_DEFAULT="quiet', "GRUB_CMDLINE_LINUX_DEFAULT=quiet'x'"])
def test_grub_value_that_cannot_be_edited_safely(line):
    with pytest.raises(CmdlineError, match=r"line 2 of /etc/default/grub.*on one line"):
        edit_grub_default("GRUB_TIMEOUT=5\n" + line + "\nsplash\"\n", INTEL_CMDLINE)


def test_kernel_cmdline_file_of_a_zfs_install():
    edit = edit_kernel_cmdline_file(PVE_ZFS_CMDLINE, INTEL_CMDLINE)
    assert edit.text_after == "root=ZFS=rpool/ROOT/pve-1 boot=zfs intel_iommu=on iommu=pt\n"
    assert not edit_kernel_cmdline_file(edit.text_after, INTEL_CMDLINE).changed
    assert edit_kernel_cmdline_file("", AMD_CMDLINE).text_after == "iommu=pt\n"


# ---------------------------------------------------------------------------
# Properties

KEYS = ["quiet", "root", "ro", "intel_iommu", "iommu", "amd_iommu", "foo", "nomodeset", "pci"]
VALUES = ["", "on", "off", "pt", "nopt", "on,sm_on", "off,sm_on", "/dev/sda1", '"a b"', "ZFS=rpool/ROOT/pve-1"]
WORD = st.builds(lambda k, v, eq: f"{k}={v}" if eq else k, st.sampled_from(KEYS), st.sampled_from(VALUES),
                 st.booleans())
BLANK = st.sampled_from([" ", "  ", "\t", " \t "])


@st.composite
def cmdlines(draw):
    parts = draw(st.lists(WORD, max_size=10))
    if draw(st.booleans()):
        parts.insert(draw(st.integers(0, len(parts))), "--")
    text = draw(st.sampled_from(["", " "]))
    for part in parts:
        text += part + draw(BLANK)
    return text + draw(st.sampled_from(["", "\n"]))


def kept(line, managed):
    """The kernel's words other than the managed ones, and everything from ``--`` on."""
    found = [w.text for w in words(line)]
    end = found.index("--") if "--" in found else len(found)
    return [w for w in found[:end] if w.partition("=")[0] not in managed], found[end:]


@settings(max_examples=400, deadline=None)
@given(cmdlines(), st.sampled_from([INTEL_CMDLINE, AMD_CMDLINE]))
def test_property_idempotent_keeps_the_rest_never_duplicates(line, rules):
    edited = ensure(line, rules)
    assert ensure(edited, rules) == edited
    assert satisfies(edited, rules)
    managed = {r.key for r in rules}
    assert kept(edited, managed) == kept(line, managed)
    kernel_words = kept(edited, set())[0]
    for rule in rules:
        assert sum(w.partition("=")[0] == rule.key for w in kernel_words) <= 1
    if satisfies(line, rules) and all(sum(w.partition("=")[0] == r.key for w in kept(line, set())[0]) <= 1
                                      for r in rules):
        assert edited == line


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab=\"' \t\n,-_$\\#")), max_size=60))
def test_property_any_text_edits_or_says_why(text):
    for edit in (edit_grub_default, edit_kernel_cmdline_file):
        try:
            result = edit(text, INTEL_CMDLINE)
        except CmdlineError:
            continue
        assert not edit(result.text_after, INTEL_CMDLINE).changed


def test_params_stop_at_the_end_of_kernel_arguments():
    assert params("a=1 b -- c=2") == {"a": ["1"], "b": []}


def test_rule_without_value_is_satisfied_by_absence():
    assert satisfies("quiet", [Rule("amd_iommu", None, frozenset({"off"}))])
