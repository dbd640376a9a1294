"""The launch flags checked against the installed SGLang's ``--help`` (parsers/sglang_help.py).

SGLang renames options between versions, so a known-good flag recorded on one version can stop the
server on another with "unrecognized arguments". Each option of the launch is looked up as argparse
would (an exact name, else an unambiguous abbreviation). One the installed SGLang does not accept, or
accepts only as deprecated, but whose rename is known (``RENAMES``, else the new name its deprecated
help names) is translated; an unknown one, or a value outside the choices the help shows, is refused:
it leaves the arguments and becomes a blocking reason (decide.py). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ansible.module_utils.gpuhost.parsers.sglang_help import ArgparseHelp

# Options SGLang renamed, old name -> new name. --nsa-* became --dsa-* (server_args.py keeps
# NSA_CHOICES = DSA_CHOICES as a deprecated alias, and the old option names as deprecated aliases).
RENAMES = {
    "--nsa-prefill-backend": "--dsa-prefill-backend",
    "--nsa-decode-backend": "--dsa-decode-backend",
}
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


def check_flags(args: list[str], help_: ArgparseHelp | None, sources: dict[str, str],
                version: str | None) -> FlagCheck:
    """The arguments as the installed SGLang takes them; ``sources`` names where each option came from
    (a known-good entry's id; the gate's own settings otherwise)."""
    if help_ is None:
        return FlagCheck(list(args))
    checked = FlagCheck([])
    seen: set[str] = set()
    for option, values in group_options(args):
        source = sources.get(option)
        where = f"known-good entry {source}" if source else GATE_SETTINGS
        action, matches = help_.resolve(option)
        target = RENAMES.get(option) or (action.replaced_by if action is not None and action.deprecated else None)
        renamed = help_.exact(target) if target else None
        if (action is None or action.deprecated) and renamed is not None and not renamed.deprecated:
            checked.translated.append({"from": option, "to": target, "values": list(values),
                                       "why": "unknown" if action is None else "deprecated"})
            checked.notes.append(
                f"{' '.join([option, *values])} ({where}) is {' '.join([str(target), *values])} in "
                f"{_sglang(version)}: renamed, "
                + ("the old name is gone there." if action is None else "the old name is deprecated there."))
            option, action = str(target), renamed
        if action is None:
            reason = (f"cannot tell which option {option} is: it could be {' or '.join(matches)}" if matches
                      else f"has no option {option}, and it is no known rename")
            checked.refused.append({"option": option, "values": list(values), "reason": reason, "entry": source,
                                    "choices": None})
            continue
        if action.deprecated:
            checked.notes.append(f"{option} ({where}) is deprecated in {_sglang(version)}, with no known new name: "
                                 "passed as it is.")
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
