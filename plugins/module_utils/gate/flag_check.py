"""The launch flags checked against the installed SGLang's ``--help`` (parsers/sglang_help.py).

SGLang renames options between versions, so a known-good flag recorded on one version can stop the
server on another with "unrecognized arguments". Each option of the launch is looked up as argparse
would (an exact name, else an unambiguous abbreviation). One the installed SGLang does not accept, or
accepts only as deprecated, but whose rename is known (``RENAMES``, both ways, else the new name its
deprecated help names) is translated, never a switch into an option that takes a value (the deprecated
``--enable-dp-attention`` becomes ``--attn-dp-size N`` only with a ``--dp-size N`` beside it); an unknown
one, or a value outside the choices the help shows, is refused: it leaves the arguments and becomes a
blocking reason (decide.py). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.sglang_help import ArgparseHelp

# Options SGLang renamed, old name -> new name. --nsa-* became --dsa-* in 0.5.13; the old names stayed as
# deprecated aliases ("[Deprecated] Use --dsa-decode-backend instead.") through 0.5.19 and are gone from
# 0.5.20 (the released `launch_server --help` of 0.5.12, 0.5.13, 0.5.19 and 0.5.20 in
# tests/fixtures/sglang). A rename is known both ways: a --dsa-* override recorded on a newer SGLang is
# the --nsa-* option on 0.5.12 and older, which has no --dsa-* at all.
RENAMES = {
    "--nsa-prefill-backend": "--dsa-prefill-backend",
    "--nsa-decode-backend": "--dsa-decode-backend",
}
OLD_NAMES = {new: old for old, new in RENAMES.items()}
# `--dp-size N --enable-dp-attention` is `--attn-dp-size N` from the SGLang that deprecated the switch
# (0.5.23 server_args.py registers --enable-dp-attention as a DeprecatedStoreTrueAction with
# new_flag="--attn-dp-size <dp-size>", and arg_groups/parallel_hook.py handle_deprecated_dp_attention
# moves dp_size to attn_dp_size). The switch takes no value and --attn-dp-size takes one, so the two are
# never a plain rename.
DP_ATTENTION = "--enable-dp-attention"
ATTN_DP_SIZE = "--attn-dp-size"
DP_SIZE_NAMES = ("--dp-size", "--data-parallel-size", "--dp")
GATE_SETTINGS = "the gate's own settings"


def group_options(args: list[str]) -> list[tuple[str, list[str]]]:
    """Command-line arguments grouped as (option, values)."""
    grouped: list[tuple[str, list[str]]] = []
    for item in args:
        if item.startswith("--") or not grouped:
            grouped.append((item, []))
        else:
            grouped[-1][1].append(item)
    return grouped


@dataclass
class FlagCheck:
    args: list[str]
    translated: list[dict[str, Any]] = field(default_factory=list)
    refused: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _sglang(version: str | None) -> str:
    return f"the installed SGLang {version}" if version else "the installed SGLang"


def _dp_attention(grouped: list[tuple[str, list[str]]], help_: ArgparseHelp, checked: FlagCheck,
                  sources: dict[str, str], version: str | None) -> list[tuple[str, list[str]]]:
    """``--dp-size N --enable-dp-attention`` as ``--attn-dp-size N`` where the switch is deprecated or gone."""
    switch = help_.exact(DP_ATTENTION)
    new = help_.exact(ATTN_DP_SIZE)
    if (not any(o == DP_ATTENTION for o, _unused in grouped) or new is None
            or (switch is not None and not switch.deprecated)):
        return grouped
    sizes = [(o, v) for o, v in grouped if o in DP_SIZE_NAMES and len(v) == 1]
    if not sizes:
        return grouped  # without a --dp-size the switch is checked on its own below
    dp_option, dp_values = sizes[-1]
    where = f"known-good entry {sources[DP_ATTENTION]}" if DP_ATTENTION in sources else GATE_SETTINGS
    checked.translated.append({"from": f"{dp_option} {dp_values[0]} {DP_ATTENTION}", "to": ATTN_DP_SIZE,
                               "values": list(dp_values), "why": "deprecated" if switch else "unknown"})
    checked.notes.append(f"{dp_option} {dp_values[0]} {DP_ATTENTION} ({where}) is {ATTN_DP_SIZE} {dp_values[0]} in "
                         f"{_sglang(version)}: the switch is " + ("deprecated there." if switch else "gone there."))
    kept = [(o, v) for o, v in grouped if o != DP_ATTENTION and o not in DP_SIZE_NAMES]
    return [*kept, (ATTN_DP_SIZE, list(dp_values))]


def _rename_target(option: str, action: Any) -> str | None:
    if option in RENAMES:
        return RENAMES[option]
    if option in OLD_NAMES:
        return OLD_NAMES[option]
    return action.replaced_by if action is not None and action.deprecated else None


def check_flags(args: list[str], help_: ArgparseHelp | None, sources: dict[str, str],
                version: str | None) -> FlagCheck:
    """The arguments as the installed SGLang takes them; ``sources`` names where each option came from
    (a known-good entry's id; the gate's own settings otherwise)."""
    if help_ is None:
        return FlagCheck(list(args))
    checked = FlagCheck([])
    seen: set[str] = set()
    for option, values in _dp_attention(group_options(args), help_, checked, sources, version):
        source = sources.get(option)
        where = f"known-good entry {source}" if source else GATE_SETTINGS
        action, matches = help_.resolve(option)
        target = _rename_target(option, action)
        renamed = help_.exact(target) if target else None
        if renamed is not None and renamed.takes_value != bool(values):
            renamed = None  # a switch and an option that takes a value are never one renamed option
        if (action is None or action.deprecated) and renamed is not None and not renamed.deprecated:
            older = option in OLD_NAMES
            checked.translated.append({"from": option, "to": target, "values": list(values),
                                       "why": "unknown" if action is None else "deprecated"})
            checked.notes.append(
                f"{' '.join([option, *values])} ({where}) is {' '.join([str(target), *values])} in "
                f"{_sglang(version)}: "
                + ("that SGLang predates the rename and knows only the old name." if older
                   else "renamed, the old name is gone there." if action is None
                   else "renamed, the old name is deprecated there."))
            option, action = str(target), renamed
        if action is None:
            reason = (f"cannot tell which option {option} is: it could be {' or '.join(matches)}" if matches
                      else f"has no option {option}, and it is no known rename")
            checked.refused.append({"option": option, "values": list(values), "reason": reason, "entry": source,
                                    "choices": None})
            continue
        if action.deprecated:
            checked.notes.append(f"{option} ({where}) is deprecated in {_sglang(version)}, with no like-for-like new "
                                 "name: passed as it is, which that SGLang still accepts.")
        wrong = [v for v in values if action.choices is not None and v not in action.choices]
        if wrong:
            checked.refused.append({
                "option": option, "values": list(values), "entry": source, "choices": list(action.choices or ()),
                "reason": f"{option} takes one of {', '.join(action.choices or ())}; not {', '.join(wrong)}"})
            continue
        if action.names[0] in seen:
            checked.notes.append(f"{option} ({where}) is set once already: this one is left out.")
            continue
        seen.add(action.names[0])
        checked.args.extend([option, *values])
    return checked
