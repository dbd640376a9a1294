"""The thresholds of the GPU health rules (rules/health.py), by name.

The catalog (catalog.py) quotes them in its titles, so the README's findings table and every
finding's evidence show the same numbers the rules use.
"""

from __future__ import annotations

# Uncorrectable (double-bit) ECC errors since the driver loaded: any one means data was lost and the
# GPU needs a reset before it is trusted again (NVIDIA's A100/H100 memory error management).
ECC_UNCORRECTED_VOLATILE_LIMIT = 0
# Uncorrectable ECC errors over the GPU's life (InfoROM): history, kept for RMA decisions.
ECC_UNCORRECTED_AGGREGATE_LIMIT = 0
# PCIe AER counters since boot, per device: any fatal or non-fatal uncorrectable error counts; corrected
# errors (bad TLPs, replays) only in numbers that say the link's signal is marginal.
AER_FATAL_LIMIT = 0
AER_NONFATAL_LIMIT = 0
AER_CORRECTABLE_LIMIT = 100
# Clocks event reasons (nvmlClocksEventReason*) that mean the GPU is held back by something wrong with
# it or its surroundings, not by being idle, a clock setting or the normal power cap.
CLOCKS_PROBLEM_REASONS = ("hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
# nvidia-fabricmanager states (systemctl is-active) that mean it is not running.
FABRIC_MANAGER_RUNNING = ("active", "activating", "reloading")
# NVML GPU fabric states that say registration with the fabric is not done; "not_supported" is a GPU
# outside an NVSwitch fabric.
FABRIC_NOT_READY_STATES = ("not_started", "in_progress")
