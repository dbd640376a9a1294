"""The model type: a model's shape (layers, hidden size, all-reduces per layer and outside them, the
activations' bytes) at a tensor-parallel size, its all-reduces per decoded token, and how it is read.

The ways in, all to ``Model``: ``load_model`` checks a mapping (a YAML or JSON document, an Ansible variable
such as nccl_bench's model option, an entry of known.py) field by field; known.py ``known_model``
takes a known model by its key; config_json.py ``model_from_config`` reads a model's own config.json.
ceiling.py prices a Model's communication ceiling.

Pure: no Ansible, no I/O. Errors are ``ModelError`` (a ``ValueError``) saying what was expected,
what was found and what to do.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.model.errors import ModelError
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import unknown_keys


@dataclass(frozen=True)
class Model:
    """A model's shape at the tensor-parallel size it is served with."""

    name: str
    layers: int
    allreduces_per_layer: int
    hidden_size: int
    dtype_bytes: int  # of the activations that are all-reduced: 2 for bf16/fp16, also for fp4/fp8 weights
    tensor_parallel_size: int
    notes: str = ""
    # All-reduces outside the layers: the vocab-parallel embedding's, and MTP draft layers' when speculating.
    extra_allreduces: int = 0

    @property
    def allreduces_per_step(self) -> int:
        """All-reduces one decode step runs under tensor parallelism (above size 1): one token per stream."""
        return self.layers * self.allreduces_per_layer + self.extra_allreduces

    def at_tensor_parallel_size(self, size: int) -> Model:
        """The same model served over ``size`` GPUs."""
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ModelError(f"model {self.name!r}: expected a tensor-parallel size as a whole number of 1 or more; "
                             f"found {size!r}. Pass the --tp the server runs with")
        return replace(self, tensor_parallel_size=size)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


_INT_FIELDS = ("layers", "allreduces_per_layer", "hidden_size", "dtype_bytes", "tensor_parallel_size")
_FIELDS = ("name", *_INT_FIELDS, "notes", "extra_allreduces")


def load_model(data: Mapping[str, Any]) -> Model:
    """A Model from a mapping (a YAML or JSON document, an Ansible variable), checked field by field."""
    if not isinstance(data, Mapping):
        raise ModelError(f"model: expected a mapping of {', '.join(_FIELDS)}; found "
                         f"{type(data).__name__}. Give the model as a dictionary")
    unknown = unknown_keys(data, _FIELDS, "model")
    if unknown:
        raise ModelError("; ".join(unknown) + ". Rename or remove " + ("it" if len(unknown) == 1 else "them"))
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ModelError(f"model: expected 'name' as a non-empty string; found {name!r}. Name the model")
    values: dict[str, int] = {}
    for key in _INT_FIELDS:
        if key not in data:
            raise ModelError(f"model {name!r}: expected the field {key!r}; found it missing. "
                             "Take it from the model's config.json (num_hidden_layers, hidden_size, torch_dtype)")
        value = data[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ModelError(f"model {name!r}: expected {key!r} as a whole number of 1 or more; "
                             f"found {value!r}. Correct the value")
        values[key] = value
    extra = data.get("extra_allreduces", 0)
    if isinstance(extra, bool) or not isinstance(extra, int) or extra < 0:
        raise ModelError(f"model {name!r}: expected 'extra_allreduces' as a whole number of 0 or more; "
                         f"found {extra!r}. Count the all-reduces outside the layers (1 for the embedding)")
    values["extra_allreduces"] = extra
    notes = data.get("notes", "")
    if not isinstance(notes, str):
        raise ModelError(f"model {name!r}: expected 'notes' as text; found {type(notes).__name__}. "
                         "Write the notes as one string")
    return Model(name=name.strip(), notes=notes, **values)
