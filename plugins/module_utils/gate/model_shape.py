"""The collectives per decode step counted from the model's own config.json, in place of a known model's.

deploy_gate reads the model directory's config.json on the host (serving/model_dir.py read_config) and the
gate counts its collectives (model/config_json.py collectives_per_step). The deployment gate prices its
communication ceiling with those counts when they are modelled: the file the server loads is better evidence
than a known model written for the family. When both exist and disagree, a note names each field. An
architecture that is not modelled, or a config.json that cannot be read, leaves the known model's counts, or
no ceiling at all: the counts are never guessed.
"""

from __future__ import annotations

from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate.inputs import DeployModel, as_int, as_text
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.config_json import collectives_per_step, disagreements
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError

_FIELDS = ("layers", "hidden_size", "allreduces_per_layer", "dtype_bytes", "extra_allreduces",
           "draft_allreduces_per_step")


def config_counts(config: Any, problem: Any = None) -> dict[str, Any] | None:
    """The collectives per step of a config.json already read, for any tensor-parallel size above 1; a
    ``not_modelled`` result with its reason when the file could not be read (``problem``), is not a JSON object,
    or names an architecture the counts do not cover; None when no config.json was given."""
    if problem is not None:
        said = as_text(problem) or repr(problem)
        return {"status": "not_modelled", "reason": f"config.json was not read: {said}", "allreduces_per_step": None}
    if config is None:
        return None
    try:
        return collectives_per_step(config)
    except ModelError as exc:
        return {"status": "not_modelled", "reason": str(exc), "allreduces_per_step": None}


def apply_collectives(deploy: DeployModel, collectives: Any, notes: list[str], label: str = "model_config") -> None:
    """Put the config.json's counts into ``deploy.shape`` (and say so in ``shape_source``) when modelled."""
    if collectives is None:
        return
    kept = f"the communication ceiling uses {deploy.shape_source}" if deploy.shape else \
        "the communication ceiling is not modelled"
    if not isinstance(collectives, dict):
        notes.append(f"{label}: expected the collectives mapping collectives_per_step returns; found "
                     f"{type(collectives).__name__}: {kept}.")
        return
    if collectives.get("status") == "not_modelled":
        reason = as_text(collectives.get("reason")) or "no reason given"
        notes.append(f"The model's config.json gives no collectives per step ({reason}): {kept}.")
        if not deploy.shape:
            deploy.shape_not_modelled = reason
        return
    counts = {name: as_int(collectives.get(name)) for name in _FIELDS}
    if collectives.get("status") != "modelled" or not counts["layers"] or not counts["hidden_size"] \
            or any(value is None or value < 0 for value in counts.values()):
        notes.append(f"{label}: expected status modelled with whole numbers for {', '.join(_FIELDS)} (layers and "
                     f"hidden_size above 0), as collectives_per_step returns; found {collectives!r}: {kept}.")
        return
    if deploy.shape:
        found = disagreements(deploy.shape, {**counts, "status": "modelled"})
        if found:
            notes.append(f"The model's config.json and {deploy.shape_source} disagree ({'; '.join(found)}): the "
                         "config.json's counts price the communication ceiling.")
    architecture = as_text(collectives.get("architecture"))
    deploy.shape = {
        "name": deploy.label,
        "layers": counts["layers"],
        "allreduces_per_layer": counts["allreduces_per_layer"],
        "hidden_size": counts["hidden_size"],
        "dtype_bytes": counts["dtype_bytes"],
        # Multi-token-prediction draft steps run their own all-reduces (model/config_json.py model_fields).
        "extra_allreduces": counts["extra_allreduces"] + counts["draft_allreduces_per_step"],
    }
    deploy.shape_source = "the model's config.json" + (f" ({architecture})" if architecture else "")
