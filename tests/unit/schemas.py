"""The declared JSON schemas of the facts and reports (docs/*.schema.json), loaded in one place.

docs/gpu_host.schema.json: its root is the ``gpu_host`` facts dict, ``#/$defs/report`` is
reports/<host>.json. docs/gate_result.schema.json: reports/<host>-gate.json. Only the tests read
them: module_utils runs on the targets, which have neither docs/ nor jsonschema.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from tests import paths

DOCS = paths.ROOT / "docs"
GPU_HOST = DOCS / "gpu_host.schema.json"
GATE_RESULT = DOCS / "gate_result.schema.json"


@cache
def _text(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def load(path: Any) -> dict[str, Any]:
    """A fresh copy of one schema document."""
    return json.loads(_text(path.name))


def documented_schema_version() -> int:
    """The facts' schema_version the schema states (its const)."""
    return load(GPU_HOST)["properties"]["schema_version"]["const"]


def _registry() -> Registry:
    return Registry().with_resources(
        [(doc["$id"], Resource.from_contents(doc)) for doc in (load(GPU_HOST), load(GATE_RESULT))])


def validator(kind: str) -> Draft202012Validator:
    """facts, report or gate; or a definition of either file as "gpu_host#/$defs/..." / "gate_result#/$defs/..."."""
    documents = {"facts": (GPU_HOST, ""), "report": (GPU_HOST, "#/$defs/report"), "gate": (GATE_RESULT, "")}
    if kind in documents:
        path, pointer = documents[kind]
    else:
        name, _, pointer = kind.partition("#")
        path, pointer = DOCS / f"{name}.schema.json", f"#{pointer}"
    return Draft202012Validator({"$ref": load(path)["$id"] + pointer}, registry=_registry())
