"""What ``nvidia-smi -q`` says about each GPU, whichever of its two forms it was read from.

nvidia_smi_q_text reads the indented text of ``nvidia-smi -q``, nvidia_smi_q_xml the document of
``nvidia-smi -q -x``; both turn a GPU into the same mapping of the strings printed and hand it to
nvidia_smi_q_build, which makes these types, so the two forms of one GPU give equal results and every
value is read by the same rules:

* what nvidia-smi could not give (``N/A``, ``[N/A]``, ``Not Supported``, ``Unknown Error``,
  ``Requested functionality has been deprecated``, ``Insufficient Permissions``, ``GPU is lost``, in
  brackets or not), a section it printed as N/A as a whole, and a section or field it did not print,
  are None; a section of which nothing could be read is None too. Nothing is guessed.
* numbers are ints (``81559 MiB`` -> 81559, ``16x`` -> 16, ``639 bank(s)`` -> 639); modes are bools
  (Enabled/Disabled, Yes/No, Active/Not Active); names are kept as printed.
* a value of an unexpected form is None and lands in ``GpuQuery.unread`` (field -> as printed), so a
  newer driver's wording shows up instead of failing the whole parse.

Output schema (``NvidiaSmiQ.as_dict()``): ``format`` ("text" or "xml"), ``driver_version``,
``cuda_version``, ``attached_gpus`` (int), ``timestamp`` (as printed), ``complete`` (XML: the document
ran to its end; text: None, a cut text cannot be told) and ``gpus``, one ``GpuQuery`` each:

* ``position`` (0-based, in output order) and ``index`` (the NVML index: the position when the output
  is one run listing as many GPUs as ``Attached GPUs`` says, else None: ``-i`` selects GPUs without
  saying which), ``bus_id`` (``0000:41:00.0``, as ``pci_common.parse_bdf`` writes it), ``uuid``,
  ``minor_number``, ``product_name``, ``product_brand``, ``product_architecture``, ``vbios_version``
  (``VBIOS Version``, as printed: 96.00.89.00.01),
  ``compute_capability`` ("9.0", when printed), ``persistence_mode``, ``mig_mode``;
* ``pcie``: ``gen_current``, ``gen_max``, ``gen_device_max``, ``gen_host_max``, ``width_current``,
  ``width_max``; ``bar1_total_mib``, ``fb_total_mib``;
* ``ecc_mode_current`` / ``ecc_mode_pending``; ``ecc_errors``: ``layout`` ("bit": the Single/Double
  Bit counters of drivers before Ampere, "sram_dram": the SRAM/DRAM counters since), ``volatile`` and
  ``aggregate``, each ``{correctable, uncorrectable, counters}`` (``counters``: counter -> int or None,
  such as ``single_bit_total`` or ``sram_uncorrectable_parity``);
* ``retired_pages``: ``single_bit``, ``double_bit`` (pages), ``pending_blacklist``,
  ``pending_retirement`` and ``pending`` (either);
* ``remapped_rows``: ``correctable``, ``uncorrectable``, ``pending``, ``failure``, ``histogram``
  (max/high/partial/low/none -> banks, or None);
* ``clocks_event_reasons``: reason -> active (bool or None), reasons by their NVML names
  (``gpu_idle``, ``applications_clocks_setting``, ``sw_power_cap``, ``hw_slowdown``,
  ``hw_thermal_slowdown``, ``hw_power_brake_slowdown``, ``sync_boost``, ``sw_thermal_slowdown``,
  ``display_clock_setting``; a newer driver's reason under its own label in snake case), whether the
  output calls the section "Clocks Event Reasons" or (before R535) "Clocks Throttle Reasons";
* ``virtualization_mode`` (as printed: "None", "Pass-Through" (the GPU is passed through to this VM),
  "VGPU", "Host VGPU"), ``host_vgpu_mode``, ``in_vm`` (True for Pass-Through and VGPU, False for
  None and Host VGPU, else None);
* ``fabric``: ``state``, ``status``, ``clique_id`` (int), ``cluster_uuid``, ``health_summary``;
* ``unread``.

``health_view(gpu)`` gives the flat dict a health check reads (see its docstring).

Totals of ECC errors: the sum of the counters the layout has (Single/Double Bit: the ``Total`` line;
SRAM/DRAM: SRAM and DRAM, SRAM uncorrectable being Parity plus SEC-DED on drivers that split it).
When some of them are unknown the total is the sum of the known ones if that is above 0 (at least
that many errors) and None otherwise: zero known errors say nothing about the unknown counters.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.pci_common import PciParseError, parse_bdf

CLOCKS_EVENT_REASONS = (
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown",
    "hw_power_brake_slowdown", "sync_boost", "sw_thermal_slowdown", "display_clock_setting",
)
"""The reasons nvidia-smi prints, in its order, by their NVML names (``nvmlClocksEventReasonGpuIdle`` ->
``gpu_idle``), the names audit/nvml_health gives the bits of NVML's mask."""

HISTOGRAM_BUCKETS = ("max", "high", "partial", "low", "none")

_IN_VM = {"passthrough": True, "vgpu": True, "none": False, "hostvgpu": False, "hostvsga": False}


def normal_bus_id(raw: Any) -> str | None:
    """``00000000:41:00.0`` (or any form ``parse_bdf`` reads) as ``0000:41:00.0``; None for anything else."""
    if not isinstance(raw, str):
        return None
    try:
        return parse_bdf(raw)
    except PciParseError:
        return None


def _any_true(*values: bool | None) -> bool | None:
    """True if any is; False when those known all say False (drivers print one name or the other of
    the one NVML state: "Pending" before R450, "Pending Page Blacklist" since); None when none is known."""
    known = [value for value in values if value is not None]
    if not known:
        return None
    return any(known)


# --------------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True)
class PcieLink:
    gen_current: int | None = None
    gen_max: int | None = None
    gen_device_max: int | None = None  # what the GPU supports (R510+)
    gen_host_max: int | None = None  # what the slot above it supports (R510+)
    width_current: int | None = None
    width_max: int | None = None


@dataclass(frozen=True)
class EccCounts:
    """One timescale of ECC errors: volatile (since the driver loaded) or aggregate (lifetime)."""

    correctable: int | None
    uncorrectable: int | None
    counters: dict[str, int | None] = field(default_factory=dict)


@dataclass(frozen=True)
class EccErrors:
    layout: str | None  # "bit" (Single/Double Bit) or "sram_dram"; None when neither was recognised
    volatile: EccCounts | None
    aggregate: EccCounts | None


@dataclass(frozen=True)
class RetiredPages:
    single_bit: int | None
    double_bit: int | None
    pending_blacklist: bool | None
    pending_retirement: bool | None

    @property
    def pending(self) -> bool | None:
        """True when a page waits to be retired (a reset or reboot retires it); None when unknown."""
        return _any_true(self.pending_blacklist, self.pending_retirement)


@dataclass(frozen=True)
class RemappedRows:
    correctable: int | None
    uncorrectable: int | None
    pending: bool | None  # a remap waits for a GPU reset
    failure: bool | None  # a remap failed: NVIDIA's RMA criterion
    histogram: dict[str, int | None] | None = None  # bank availability: max/high/partial/low/none


@dataclass(frozen=True)
class Fabric:
    state: str | None
    status: str | None
    clique_id: int | None
    cluster_uuid: str | None
    health_summary: str | None


@dataclass(frozen=True)
class GpuQuery:
    position: int
    index: int | None
    bus_id: str | None
    uuid: str | None = None
    minor_number: int | None = None
    product_name: str | None = None
    product_brand: str | None = None
    product_architecture: str | None = None
    vbios_version: str | None = None
    compute_capability: str | None = None
    persistence_mode: bool | None = None
    mig_mode: bool | None = None
    pcie: PcieLink = field(default_factory=PcieLink)
    bar1_total_mib: int | None = None
    fb_total_mib: int | None = None
    ecc_mode_current: bool | None = None
    ecc_mode_pending: bool | None = None
    ecc_errors: EccErrors | None = None
    retired_pages: RetiredPages | None = None
    remapped_rows: RemappedRows | None = None
    clocks_event_reasons: dict[str, bool | None] | None = None
    virtualization_mode: str | None = None
    host_vgpu_mode: str | None = None
    fabric: Fabric | None = None
    unread: dict[str, str] = field(default_factory=dict)

    @property
    def in_vm(self) -> bool | None:
        """True when the driver says this GPU is passed through to (or a vGPU of) the VM it runs in."""
        if self.virtualization_mode is None:
            return None
        return _IN_VM.get(re.sub(r"[^a-z]", "", self.virtualization_mode.lower()))

    @property
    def active_clocks_event_reasons(self) -> list[str] | None:
        """The reasons printed Active, in nvidia-smi's order; None when the section is unknown."""
        if self.clocks_event_reasons is None:
            return None
        return [name for name, active in self.clocks_event_reasons.items() if active]

    def as_dict(self) -> dict[str, Any]:
        result = asdict(self)
        result["in_vm"] = self.in_vm
        if self.retired_pages is not None:
            result["retired_pages"]["pending"] = self.retired_pages.pending
        return result


@dataclass(frozen=True)
class NvidiaSmiQ:
    format: str  # "text" or "xml"
    gpus: list[GpuQuery]
    driver_version: str | None = None
    cuda_version: str | None = None
    attached_gpus: int | None = None
    timestamp: str | None = None
    complete: bool | None = None  # XML: the document ran to its end; text: None (cannot be told)

    def gpu(self, bus_id: str) -> GpuQuery | None:
        """The GPU at a PCI address, in any form ``parse_bdf`` reads (``41:00.0``, ``00000000:41:00.0``)."""
        wanted = normal_bus_id(bus_id)
        return next((gpu for gpu in self.gpus if wanted is not None and gpu.bus_id == wanted), None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "format": self.format, "driver_version": self.driver_version, "cuda_version": self.cuda_version,
            "attached_gpus": self.attached_gpus, "timestamp": self.timestamp, "complete": self.complete,
            "gpus": [gpu.as_dict() for gpu in self.gpus],
        }


def health_view(gpu: GpuQuery) -> dict[str, Any]:
    """What a health check reads of one GPU, flat, for the audit's fallback when NVML is missing.

    Keys (None wherever the output could not tell):

    * ``ecc_mode``: ECC currently enabled (bool).
    * ``ecc_uncorrected_volatile`` / ``ecc_uncorrected_aggregate``: uncorrectable ECC errors since the
      driver loaded / over the GPU's life (int; see the module docstring for how the total is made).
    * ``retired_pages_pending``: a retired page waits for a reset (bool; GPUs before Ampere).
    * ``remapped_rows_pending``: a remapped row waits for a reset; ``remapped_rows_failed``: a remap
      failed (bools; Ampere and later).
    * ``clocks_event_reasons``: the reasons holding the clocks down now, as a list of their NVML names
      (``["gpu_idle"]``, ``["sw_power_cap", "hw_slowdown"]``); ``[]`` when none is active.
    * ``persistence_mode`` (bool), ``virtualization_mode`` (as printed: "None", "Pass-Through",
      "VGPU", "Host VGPU"), ``bar1_total_mib`` (int).
    * ``pcie``: ``{gen_current, gen_max, width_current, width_max}`` (ints).
    """
    ecc = gpu.ecc_errors
    rows = gpu.remapped_rows
    return {
        "ecc_mode": gpu.ecc_mode_current,
        "ecc_uncorrected_volatile": ecc.volatile.uncorrectable if ecc and ecc.volatile else None,
        "ecc_uncorrected_aggregate": ecc.aggregate.uncorrectable if ecc and ecc.aggregate else None,
        "retired_pages_pending": gpu.retired_pages.pending if gpu.retired_pages else None,
        "remapped_rows_pending": rows.pending if rows else None,
        "remapped_rows_failed": rows.failure if rows else None,
        "clocks_event_reasons": gpu.active_clocks_event_reasons,
        "persistence_mode": gpu.persistence_mode,
        "virtualization_mode": gpu.virtualization_mode,
        "bar1_total_mib": gpu.bar1_total_mib,
        "pcie": {
            "gen_current": gpu.pcie.gen_current, "gen_max": gpu.pcie.gen_max,
            "width_current": gpu.pcie.width_current, "width_max": gpu.pcie.width_max,
        },
    }
