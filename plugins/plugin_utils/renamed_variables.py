"""The collection's variables that were renamed, and what a run that still sets the former name is told.

A renamed variable keeps working under its former name: where a run sets it, its value is read (it was set on
purpose, while the new name may hold only the role's default) and one warning asks for the new name. Read through
the lookup gpuhost.gpu.variable, so that the roles and playbooks never name the former variables themselves.
"""

from __future__ import annotations

from types import MappingProxyType

# The current name -> the former name it replaced.
RENAMED_VARIABLES = MappingProxyType({
    "gpu_bench_model": "gpu_bench_model_profile",
    "gpu_analyze_model": "gpu_analyze_model_profile",
})


def renamed_variable_message(name: str, former: str) -> str:
    # No value and no host in it: Ansible shows one warning for the run however many hosts and tasks repeat it.
    return (f"{former} is renamed {name}: this run reads {former}, and {name} is left aside; set {name} instead "
            f"of {former}.")
