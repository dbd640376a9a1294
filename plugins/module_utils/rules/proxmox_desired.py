"""The GPU passthrough config a Proxmox VM needs for P2P, what differs from it, and the `qm set` that fixes it.

Pure: a parsed ``VmConfig`` and the caller's choices in, plain data out. The target, for the GPUs
chosen (``hostpciN`` entries of the VM or host functions ``0000:41:00.0``):

* each GPU on its own ``hostpciN`` line naming its function (``0000:41:00.0``: a bare ``41:00``
  passes every function as ``hostpciN.0``, ``.1``..., which ``-set device.hostpciN`` cannot reach),
  ``pcie=1``, without ``hidden`` (no hostpci option: qemu-server refuses the line) and without
  ``x-vga`` (qemu-server then hides KVM); other options kept in their order. A GPU that is not on a
  line yet gets the lowest free ``hostpciN``. An NVIDIA board's GPU is its function 0 (audio and
  USB-C controllers are functions 1-3), so a whole-device line is narrowed to ``.0``;
* ``machine`` of type q35 (``pcie=1`` needs it; other machine options kept);
* ``cpu: host`` without ``hidden`` (it runs QEMU with kvm=off and the driver then ignores the
  clique); other cpu options kept; ``hidden=0`` added while another hostpci line keeps ``x-vga=1``;
* ``args``: one ``-set device.hostpciN.x-nv-gpudirect-clique=<id>`` per GPU, in place of an existing
  one or appended, ``kvm=off`` taken out of a ``-cpu`` word, every other word kept as it was;
* ``balloon: 0``; ``numa: 1`` when asked or, with ``numa="auto"``, when the host has several nodes;
* ``hidden`` taken off every other hostpci line too: the VM does not start with it.

A value that already means the target (``cputype=host``, ``pcie=on``, a machine ``pc-q35-8.1``) is
kept as written, so a fixed config gives no change. Cliques: ``None`` puts every GPU in one
clique, the one most of them have already, else 0; a list of groups gives group i the id i; a
mapping gives each id its group. Grouping GPUs that may peer is the caller's choice (from the
host's topology); the ids must be 0..15.

``desired_state(config, vmid, gpus, cliques=None, numa="auto", host_numa_nodes=None)`` returns a
``DesiredState``: gpus, values (key -> wanted value; None: absent), changes (key, old, new; new
None: delete), warnings; ``argv()`` is the ``qm set`` that makes the changes ([] for none),
``text_changes()`` the same for ``proxmox_config_edit.apply_to_text``, ``diff(options)`` the
before/after lines, ``mismatches(options)`` and ``pending_keys(config)`` check a config against
it. Bad choices raise ``DesiredStateError`` (a ``ValueError``) saying what was expected.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.proxmox_config import (
    MAX_CLIQUE,
    MAX_HOSTPCI,
    VmConfig,
    clique_of,
    machine_type,
    normalize_pci_id,
    parse_args,
    parse_bool,
    parse_hostpci,
    parse_int,
    parse_property_string,
    split_args,
)
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.proxmox_plans import (
    clique_set,
    hostpci_value,
    qm_set_argv,
    restart_command,
    sets_clique_of,
    without_kvm_off,
)

HOSTPCI_ID = re.compile(r"hostpci(?P<index>\d+)")
BOOLEAN_OPTIONS = ("pcie", "x-vga", "rombar", "legacy-igd", "hidden")
NUMA_CHOICES = ("auto", True, False)


class DesiredStateError(ValueError):
    """Choices that do not describe a config: the message says what was expected and what was found."""


@dataclass(frozen=True)
class Change:
    key: str
    old: str | None
    new: str | None  # None: the key is deleted

    def as_dict(self) -> dict[str, Any]:
        return {"key": self.key, "old": self.old, "new": self.new}


@dataclass
class Gpu:
    index: int
    bdf: str | None  # the function its line names; None for a mapped device (the mapping names it)
    clique: int = 0
    added: bool = False  # a hostpci line added for it

    @property
    def id(self) -> str:
        return f"hostpci{self.index}"


@dataclass
class DesiredState:
    vmid: int
    gpus: list[Gpu] = field(default_factory=list)
    values: dict[str, str | None] = field(default_factory=dict)  # managed key -> wanted value (None: absent)
    changes: list[Change] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.changes)

    def argv(self) -> list[str]:
        """`qm set <vmid> --key value ... --delete a,b`; [] when nothing changes."""
        if not self.changes:
            return []
        return qm_set_argv(self.vmid, [(c.key, c.new) for c in self.changes if c.new is not None],
                           [c.key for c in self.changes if c.new is None])

    def command(self) -> str | None:
        return shlex.join(self.argv()) if self.changes else None

    def restart_command(self) -> str:
        return restart_command(self.vmid)

    def text_changes(self) -> dict[str, str | None]:
        return {c.key: c.new for c in self.changes}

    def diff(self, options: dict[str, str]) -> dict[str, str]:
        """The managed keys' lines before and after, for Ansible's diff mode."""
        before = "".join(f"{k}: {options[k]}\n" for k in self.values if options.get(k) is not None)
        after = "".join(f"{k}: {v}\n" for k, v in self.values.items() if v is not None)
        return {"before": before, "after": after}

    def mismatches(self, options: dict[str, str]) -> list[str]:
        """Managed keys whose value in ``options`` does not mean the wanted one."""
        return [f"{key}: expected {want if want is not None else '(absent)'}, found "
                f"{options.get(key) if options.get(key) is not None else '(absent)'}"
                for key, want in self.values.items() if not same_value(key, options.get(key), want)]

    def pending_keys(self, config: VmConfig) -> list[str]:
        """Managed keys that only [PENDING] brings to the wanted value: they wait for QEMU's next start."""
        return [key for key, want in self.values.items()
                if not same_value(key, config.current.options.get(key), want)
                and same_value(key, config.effective().get(key), want)]


# ---------------------------------------------------------------------------
# What a value means, so that a value written differently is not changed for nothing


def _normalized(key: str, value: str) -> Any:
    if HOSTPCI_ID.fullmatch(key):
        options, _warnings = parse_property_string(value, default_key="host")
        if "host" in options:
            options["host"] = ";".join(normalize_pci_id(h) or h.strip() for h in options["host"].split(";"))
    elif key in ("cpu", "machine"):
        options, _warnings = parse_property_string(value, default_key="cputype" if key == "cpu" else "type")
    elif key == "args":
        return split_args(value)
    elif key == "numa":
        return parse_bool(value)
    elif key == "balloon":
        return parse_int(value)
    else:
        return value
    return {k: (parse_bool(v) if k in BOOLEAN_OPTIONS else v) for k, v in options.items()}


def same_value(key: str, old: str | None, new: str | None) -> bool:
    if old is None or new is None:
        return old is new
    return old == new or _normalized(key, old) == _normalized(key, new)


# ---------------------------------------------------------------------------
# The GPUs and their cliques


def gpu_function(host_ids: list[str]) -> str | None:
    """The GPU among a line's host ids: the one function named, or function 0 of a board passed whole."""
    named = [h for h in host_ids if "." in h]
    if named:
        return next((h for h in named if h.endswith(".0")), named[0])
    return f"{host_ids[0]}.0" if host_ids else None


def resolve_gpus(options: dict[str, str], gpus: list[str]) -> list[Gpu]:
    """Each GPU named as `hostpciN` or as a host function, on the line that passes it or on a new one."""
    if not isinstance(gpus, list) or not gpus:
        raise DesiredStateError(f"expected a non-empty list of GPUs (hostpciN or 0000:41:00.0); found {gpus!r}")
    entries = {int(m.group("index")): parse_hostpci(int(m.group("index")), value)
               for key, value in options.items() for m in [HOSTPCI_ID.fullmatch(key)] if m}
    resolved: list[Gpu] = []
    wanted_new: list[str] = []
    for item in gpus:
        name = str(item).strip()
        by_id = HOSTPCI_ID.fullmatch(name)
        if by_id:
            index = int(by_id.group("index"))
            if index not in entries:
                raise DesiredStateError(f"expected GPUs among the VM's hostpci lines "
                                        f"({', '.join(f'hostpci{i}' for i in sorted(entries)) or 'none'}); found "
                                        f"{name}. Name a line the VM has, or the GPU's host function.")
            entry = entries[index]
            resolved.append(Gpu(index, None if entry.mapping else gpu_function(entry.host_ids)))
            continue
        bdf = normalize_pci_id(name)
        if bdf is None or "." not in bdf:
            raise DesiredStateError(f"expected a GPU as hostpciN or as a host PCI function like 0000:41:00.0 "
                                    f"(with its function); found {name!r}")
        covering = [i for i, e in sorted(entries.items()) if bdf in e.host_ids or bdf.rsplit(".", 1)[0] in e.host_ids]
        if covering:
            resolved.append(Gpu(covering[0], bdf))
        else:
            wanted_new.append(bdf)
    for bdf in wanted_new:
        taken = set(entries) | {g.index for g in resolved}
        free = next((i for i in range(MAX_HOSTPCI) if i not in taken), None)
        if free is None:
            raise DesiredStateError(f"expected a free hostpci line (hostpci0..hostpci{MAX_HOSTPCI - 1}) for {bdf}; "
                                    "found all taken. Remove a passed device first.")
        resolved.append(Gpu(free, bdf, added=True))
    indexes, bdfs = [g.index for g in resolved], [g.bdf for g in resolved if g.bdf]
    if len(set(indexes)) != len(indexes) or len(set(bdfs)) != len(bdfs):
        raise DesiredStateError(f"expected each GPU once; found {gpus!r}, which names one GPU twice "
                                "(as its line and as its function, or the same one twice)")
    return sorted(resolved, key=lambda g: g.index)


def _matches(gpu: Gpu, name: str) -> bool:
    if name == gpu.id:
        return True
    bdf = normalize_pci_id(name)
    return bdf is not None and bdf == gpu.bdf


def assign_cliques(gpus: list[Gpu], cliques: Any, existing: dict[str, int | None] | None = None) -> None:
    """Set each GPU's clique from a list of groups (group i: id i) or a mapping id -> group.

    None: one clique for all, the one most of them have already (``existing``: hostpciN -> clique;
    the lowest on a tie), else 0, so that a VM already in one clique is not restarted for a new id.
    """
    if cliques is None:
        counts = Counter(c for c in (existing or {}).values() if c is not None)
        shared = min(counts, key=lambda c: (-counts[c], c)) if counts else 0
        for gpu in gpus:
            gpu.clique = shared
        return
    if isinstance(cliques, dict):
        groups = list(cliques.items())
    elif isinstance(cliques, list):
        groups = list(enumerate(cliques))
    else:
        raise DesiredStateError(f"expected cliques as a list of GPU groups or a mapping of clique id to a group; "
                                f"found {type(cliques).__name__} {cliques!r}")
    placed: dict[str, int] = {}
    for raw_id, group in groups:
        clique = parse_int(str(raw_id))
        if clique is None or not 0 <= clique <= MAX_CLIQUE:
            raise DesiredStateError(f"expected clique ids 0..{MAX_CLIQUE} (QEMU refuses to start otherwise); "
                                    f"found {raw_id!r}")
        if not isinstance(group, list) or not group:
            raise DesiredStateError(f"expected clique {clique} to be a non-empty list of GPUs; found {group!r}")
        for name in group:
            gpu = next((g for g in gpus if _matches(g, str(name).strip())), None)
            if gpu is None:
                raise DesiredStateError(f"expected the GPUs of clique {clique} among the GPUs managed "
                                        f"({', '.join(g.bdf or g.id for g in gpus)}); found {name!r}")
            if gpu.id in placed and placed[gpu.id] != clique:
                raise DesiredStateError(f"expected each GPU in one clique; found {name!r} in cliques "
                                        f"{placed[gpu.id]} and {clique}")
            placed[gpu.id] = gpu.clique = clique
    missing = [g.bdf or g.id for g in gpus if g.id not in placed]
    if missing:
        raise DesiredStateError(f"expected every GPU in a clique group; found none for {', '.join(missing)}. "
                                "Add them to a group (a GPU alone in its group peers with no other).")


# ---------------------------------------------------------------------------
# The wanted value of each key


def _hostpci_wanted(options: dict[str, str], key: str, gpu: Gpu | None) -> str | None:
    value = options.get(key)
    if gpu is None:  # a line that is not one of the GPUs: only `hidden` goes
        fields, _warnings = parse_property_string(value or "", default_key="host")
        if "hidden" not in fields:
            return value
        return hostpci_value(fields, host=fields.get("host"), pcie=bool(parse_bool(fields.get("pcie"))),
                             drop_x_vga=False)
    fields, _warnings = parse_property_string(value or "", default_key="host")
    return hostpci_value(fields, host=None if "mapping" in fields else gpu.bdf, pcie=True, drop_x_vga=True)


def _machine_wanted(value: str | None) -> str:
    if machine_type(value) == "q35":
        return value or "q35"
    fields, _warnings = parse_property_string(value or "", default_key="type")
    return ",".join(["q35", *(f"{k}={v}" for k, v in fields.items() if k != "type")])


def _cpu_wanted(value: str | None, keep_kvm_shown: bool) -> str:
    fields, _warnings = parse_property_string(value or "", default_key="cputype")
    hidden = parse_bool(fields.get("hidden"))
    if fields.get("cputype") == "host" and hidden is not True and (hidden is False or not keep_kvm_shown):
        return value or "host"
    rest = [f"{k}={v}" for k, v in fields.items() if k not in ("cputype", "hidden")]
    return ",".join(["host", *rest, *(["hidden=0"] if keep_kvm_shown else [])])


def _args_wanted(value: str | None, gpus: list[Gpu]) -> str | None:
    tokens, problems = split_args(value or "")
    if problems:
        raise DesiredStateError(f"expected an args line that splits into words as qemu-server splits it; found "
                                f"{value!r}: {problems[0]}. Fix its quoting by hand, then run again.")
    cliques = {g.id: g.clique for g in gpus}
    kept: list[str] = []
    done: set[str] = set()
    position = 0
    while position < len(tokens):
        option, argument = tokens[position], tokens[position + 1] if position + 1 < len(tokens) else None
        bare = "-" + option.lstrip("-") if option.startswith("-") else option
        if argument is not None and bare == "-set" and sets_clique_of(argument, set(cliques)):
            qemu_id = argument.split(".")[1]
            if qemu_id not in done:  # in place, so that a config already right stays as written
                kept += [option, clique_set(qemu_id, cliques[qemu_id])[1]]
                done.add(qemu_id)
            position += 2
        elif argument is not None and bare == "-cpu":
            cpu = without_kvm_off(argument)
            kept += [option, cpu] if cpu else []
            position += 2
        else:
            kept.append(option)
            position += 1
    for gpu in gpus:
        if gpu.id not in done:
            kept += clique_set(gpu.id, gpu.clique)
    if kept == tokens:
        return value
    return " ".join(shlex.quote(t) for t in kept) or None


def _numa_wanted(value: str | None, numa: Any, host_numa_nodes: int | None, warnings: list[str]) -> str | None:
    if numa not in NUMA_CHOICES:
        raise DesiredStateError(f"expected numa to be auto, true or false; found {numa!r}")
    if numa == "auto":
        if host_numa_nodes is None:
            warnings.append("the host's NUMA node count is unknown: numa is left as it is; pass numa: true or false")
            return value
        if host_numa_nodes < 2:
            return value
    want = bool(numa)  # "auto" (with several nodes) or True
    if parse_bool(value) is want or (not want and value is None):
        return value
    return "1" if want else "0"


def desired_state(config: VmConfig, vmid: int, gpus: list[str], cliques: Any = None, numa: Any = "auto",
                  host_numa_nodes: int | None = None) -> DesiredState:
    """What the VM's next start needs for P2P between ``gpus``, and the changes from its config to it."""
    options = config.effective()
    state = DesiredState(vmid=vmid, gpus=resolve_gpus(options, gpus))
    args = parse_args(options.get("args"))
    assign_cliques(state.gpus, cliques, {g.id: clique_of(args, g.id)[0] for g in state.gpus})
    by_id = {g.id: g for g in state.gpus}
    wanted: dict[str, str | None] = {"machine": _machine_wanted(options.get("machine"))}
    hostpci_keys = sorted({k for k in options if HOSTPCI_ID.fullmatch(k)} | set(by_id), key=lambda k: int(k[7:]))
    for key in hostpci_keys:
        wanted[key] = _hostpci_wanted(options, key, by_id.get(key))
    for gpu in state.gpus:
        if gpu.bdf is None:
            state.warnings.append(f"{gpu.id} passes mapping {parse_property_string(options[gpu.id])[0].get('mapping')}:"
                                  " its function is named in /etc/pve/mapping/pci.cfg, whose path must end in .0 "
                                  "for the clique to reach it")
    keep_kvm_shown = any(parse_bool(parse_property_string(wanted[k] or "", default_key="host")[0].get("x-vga"))
                         for k in hostpci_keys if k not in by_id)
    wanted["cpu"] = _cpu_wanted(options.get("cpu"), keep_kvm_shown)
    wanted["args"] = _args_wanted(options.get("args"), state.gpus)
    wanted["balloon"] = options.get("balloon") if parse_int(options.get("balloon")) == 0 else "0"
    wanted["numa"] = _numa_wanted(options.get("numa"), numa, host_numa_nodes, state.warnings)
    for key, value in wanted.items():
        old = options.get(key)
        if same_value(key, old, value):
            value = old  # already means the target: kept as written
        state.values[key] = value
        if value != old:
            state.changes.append(Change(key, old, value))
    # Only the keys this module decides about are reported: other hostpci lines it left alone are not its own.
    state.values = {k: v for k, v in state.values.items()
                    if not HOSTPCI_ID.fullmatch(k) or k in by_id or v != options.get(k)}
    return state
