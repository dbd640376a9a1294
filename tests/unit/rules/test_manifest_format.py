"""The manifest format: the example manifests load and follow the published schema; a wrong one is refused
with a message naming the key, by the loader and by the schema alike."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.manifest_format import ManifestError, load
from hypothesis import given
from hypothesis import strategies as st

from tests import paths

SCHEMA = json.loads((paths.ROOT / "docs" / "host_manifest.schema.json").read_text(encoding="utf-8"))
EXAMPLES = sorted((paths.ROOT / "inventories" / "example" / "manifests").glob("*.yml"))


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((paths.ROOT / "inventories" / "example" / "manifests" / name).read_text(encoding="utf-8"))


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_example_follows_the_schema_and_loads(path: Path) -> None:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator(SCHEMA).validate(data)
    loaded = load(data)
    assert loaded["class"] == path.stem
    assert loaded["gpus"]["count"] == len(loaded["slots"])


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data[key]
    if value is _DELETE:
        del data[path[-1]]
    else:
        data[path[-1]] = value


_DELETE = object()
# (what is changed in the H100 example, to what, words the loader's message must hold)
WRONG = [
    (("format",), "gpuhost-manifest/2", "key format must be 'gpuhost-manifest/1'"),
    (("class",), "", "key class must name the host class"),
    (("gpus", "count"), _DELETE, "key gpus must hold 'count'"),
    (("gpus", "count"), 0, "key gpus.count must be a whole number of at least 1"),
    (("gpus", "count"), True, "key gpus.count must be a whole number"),
    (("gpus", "driver_version"), 550.127, "driver_version must be a non-empty string (quote versions"),
    (("gpus", "colour"), "green", "unknown key(s) colour"),
    (("gpus", "vbios_versions"), {"NVIDIA H100 80GB HBM3": []}, "must be a non-empty list of VBIOS versions"),
    (("slots", 0, "pcie_gen"), 7, "slots[0].pcie_gen must be one of 1, 2, 3, 4, 5, 6, found 7"),
    (("slots", 0, "pcie_width"), 12, "slots[0].pcie_width must be one of"),
    (("slots", 0, "pci_bus_id"), "18:00.0", "slots[0].pci_bus_id must be a PCI address like 0000:18:00.0"),
    (("slots", 0, "pci_bus_id"), _DELETE, "slots[0] must name its GPU by exactly one of 'pci_bus_id'"),
    (("slots", 1, "pci_bus_id"), "0000:18:00.0", "slots[1] names pci_bus_id 0000:18:00.0 a second time"),
    (("slots",), {"gpu": 0}, "key slots must be a list of slots"),
    (("p2p", "read"), "ok", "key p2p.read must be one of OK, CNS"),
    (("p2p", "bandwidth"), "OK", "unknown key(s) bandwidth"),
]


@pytest.mark.parametrize(("where", "value", "message"), WRONG, ids=[m for _w, _v, m in WRONG])
def test_wrong_manifest_is_refused_naming_the_key(where: tuple[Any, ...], value: Any, message: str) -> None:
    data = copy.deepcopy(example("hgx-h100-8gpu.yml"))
    _set(data, where, value)
    with pytest.raises(ManifestError) as refused:
        load(data, "hgx-h100-8gpu.yml")
    assert message in str(refused.value)
    assert str(refused.value).startswith("hgx-h100-8gpu.yml")
    # The published schema refuses it too, except a repeated slot (JSON Schema cannot say "unique by key").
    if "a second time" not in message:
        assert not jsonschema.Draft202012Validator(SCHEMA).is_valid(data)


def test_not_a_mapping_is_refused() -> None:
    with pytest.raises(ManifestError, match="must be a mapping, found list"):
        load([1, 2])


def test_addresses_as_nvml_writes_them_are_kept_lower_case() -> None:
    data = example("hgx-h100-8gpu.yml")
    data["slots"][4]["pci_bus_id"] = "00000000:9A:00.0"
    assert load(data)["slots"][4]["pci_bus_id"] == "00000000:9a:00.0"


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 40) | st.text(max_size=20) | st.sampled_from(
        ["gpuhost-manifest/1", "OK", "NS", "0000:18:00.0", "count", "slots", "gpus", "p2p", "read"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["format", "class", "gpus", "slots", "p2p", "count", "model", "driver_version",
                         "vbios_versions", "pci_bus_id", "gpu", "pcie_gen", "pcie_width", "numa_node", "read",
                         "x"]), inner, max_size=6),
    max_leaves=20)


@given(JSONISH)
def test_any_data_loads_or_is_refused_clearly(data: Any) -> None:
    try:
        loaded = load(data)
    except ManifestError as exc:
        assert str(exc)
    else:
        assert loaded["gpus"]["count"] >= 1


@given(st.fixed_dictionaries({
    "format": st.just("gpuhost-manifest/1"), "class": st.just("c"),
    "gpus": st.fixed_dictionaries({"count": st.integers(1, 16)}),
    "slots": st.lists(st.fixed_dictionaries({"gpu": st.integers(0, 15), "pcie_gen": st.integers(0, 7)}),
                      max_size=5),
    "p2p": st.dictionaries(st.sampled_from(["read", "write"]), st.sampled_from(["OK", "NS", "ok", "X"]))}))
def test_loader_and_schema_agree(data: dict[str, Any]) -> None:
    try:
        load(data)
        accepted = True
    except ManifestError:
        accepted = False
    repeated = len({slot["gpu"] for slot in data["slots"]}) < len(data["slots"])
    assert accepted == (jsonschema.Draft202012Validator(SCHEMA).is_valid(data) and not repeated)
