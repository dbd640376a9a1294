"""The deployment gate's inputs, read whatever their shape.

The gate takes plain data that other modules and the inventory produce: the ``gpu_host`` facts of
gpu_host_facts, the result of gpu_p2p_probe and the model to deploy. A missing key, a wrong type or an
unreadable value becomes ``None`` (or a problem in the model's case), never an exception, so that
the gate can always answer with a verdict and say what it could not read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ansible_collections.gpuhost.gpu.plugins.module_utils.gate import versions
from ansible_collections.gpuhost.gpu.plugins.module_utils.model.known import KNOWN_MODELS
from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers.known_names import closest, unknown_keys
from ansible_collections.gpuhost.gpu.plugins.module_utils.rules.p2p_evidence import p2p_evidence
from ansible_collections.gpuhost.gpu.plugins.module_utils.values import as_dict, as_int, as_list, as_number, as_text

GIB_PER_MIB = 1 / 1024
DEFAULT_KV_CACHE_FRACTION = 0.10
# Activations, CUDA graphs, NCCL and custom all-reduce buffers live outside weights and KV cache.
DEFAULT_HEADROOM_FRACTION = 0.10
DEFAULT_BYTES_PER_PARAM = 2.0  # bf16/fp16 weights, when only the parameter count is given
# The former name of the key shape, still read as it, with a note that asks for shape.
FORMER_SHAPE_KEY = "comm_profile"
# Every key the model to deploy may have (deploy_gate's model option, the inventory's deploy_model). Any other
# is a typo until proven otherwise: read as absent it would leave its default in place (a misspelled weights_gib
# skips the memory check).
MODEL_KEYS = frozenset({
    "name", "family", "path", "notes", "weights_gib", "params_b", "bytes_per_param", "kv_cache_gib_per_gpu",
    "kv_cache_fraction", "memory_headroom_fraction", "min_gpus", "tensor_parallel_size", "attention_heads",
    "num_attention_heads", "min_compute_capability", "min_driver", "min_cuda", "shape", "layers",
    "hidden_size", "allreduces_per_layer", "dtype_bytes", FORMER_SHAPE_KEY,
})
# The keys of a shape mapping, as model/shape.py load_model reads them.
SHAPE_KEYS = frozenset({"name", "layers", "allreduces_per_layer", "hidden_size", "dtype_bytes",
                        "tensor_parallel_size", "notes", "extra_allreduces"})


def bus_id(value: Any) -> str | None:
    """PCI address normalised to ``dddd:bb:dd.f`` lower case (NVML pads the domain to 8 digits)."""
    text = as_text(value)
    if not text:
        return None
    match = re.fullmatch(r"(?:([0-9a-fA-F]+):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])", text)
    if not match:
        return None
    domain = int(match.group(1) or "0", 16)
    return f"{domain:04x}:{match.group(2).lower()}:{match.group(3).lower()}.{match.group(4)}"


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str | None
    cc: tuple[int, int] | None
    memory_mib: float | None
    numa: int | None

    @property
    def arch(self) -> str | None:
        return f"sm_{self.cc[0]}{self.cc[1]}" if self.cc else None

    @property
    def memory_gib(self) -> float | None:
        return self.memory_mib * GIB_PER_MIB if self.memory_mib else None


@dataclass
class Host:
    gpus: list[Gpu]
    driver: str | None
    cuda: str | None
    p2p_read: list[list[Any]]
    topology: list[list[Any]]
    pci_gpu_count: int
    vfio_bound: int
    virtualization: str | None
    findings: list[dict[str, Any]]
    # NVML's P2P status for the NVLink capability, the one SGLang reads to tell an NVLink mesh.
    p2p_nvlink: list[list[Any]] = field(default_factory=list)


def read_host(audit: Any) -> Host:
    facts = as_dict(audit)
    gpus_facts = as_dict(facts.get("gpus"))
    pci_devices = [d for d in as_list(as_dict(facts.get("pci")).get("nvidia_devices"))
                   if isinstance(d, dict) and d.get("kind") == "gpu"]
    numa_by_bus = {bus_id(d.get("bdf")): as_int(d.get("numa_node")) for d in pci_devices}
    topology = as_dict(facts.get("topology"))
    numa_affinity = as_list(topology.get("numa_affinity"))
    gpus: list[Gpu] = []
    seen: set[int] = set()
    for device in as_list(gpus_facts.get("devices")):
        if not isinstance(device, dict):
            continue
        index = as_int(device.get("index"))
        if index is None or index < 0 or index in seen:
            continue
        seen.add(index)
        cc = versions.compute_capability(device.get("compute_capability")) or \
            versions.compute_capability(device.get("sm"))
        memory = as_number(device.get("memory_total_mib"))
        numa = numa_by_bus.get(bus_id(device.get("pci_bus_id")))
        if numa is None and index < len(numa_affinity):
            numa = as_int(numa_affinity[index])
        gpus.append(Gpu(index, as_text(device.get("name")), cc, memory if memory and memory > 0 else None, numa))
    gpus.sort(key=lambda g: g.index)
    findings = [f for f in as_list(facts.get("findings")) if isinstance(f, dict) and isinstance(f.get("id"), str)]
    return Host(
        gpus=gpus,
        driver=as_text(gpus_facts.get("driver_version")),
        cuda=as_text(gpus_facts.get("cuda_driver_version")),
        p2p_read=_peer_access(facts),
        topology=[row for row in as_list(topology.get("matrix")) if isinstance(row, list)],
        pci_gpu_count=len(pci_devices),
        vfio_bound=sum(1 for d in pci_devices if d.get("driver") == "vfio-pci"),
        virtualization=as_text(as_dict(facts.get("virtualization")).get("summary")),
        findings=findings,
        p2p_nvlink=[row for row in as_list(as_dict(facts.get("p2p")).get("nvlink")) if isinstance(row, list)],
    )


def _peer_access(facts: dict[str, Any]) -> list[list[Any]]:
    """The matrix the audit judged P2P from (rules/p2p_evidence.py: read, else write, a combined capability, a
    GNS/CNS matrix of another): its cells that prove something, None where its capability leaves a cell
    without meaning for peer access (NS under NVLink)."""
    decided = p2p_evidence(facts)
    if decided is None:
        return []
    # A granted cell reads "OK" whatever said it (an NCCL log's "P2P" too): the gate's placement reads OK.
    return [[label if not isinstance(label, str) or label == "X" else
             "OK" if decided.state(label) == "ok" else label if decided.state(label) == "none" else None
             for label in row] for row in decided.matrix if isinstance(row, list)]


def cell(matrix: list[list[Any]], i: int, j: int) -> str | None:
    if i < len(matrix) and j < len(matrix[i]) and isinstance(matrix[i][j], str):
        return matrix[i][j].strip() or None
    return None


@dataclass
class DeployModel:
    """The model to deploy as the inventory describes it (deploy_model): what the gate checks the host against.
    Its all-reduce shape (``shape``, the fields of model/shape.py Model but the tensor-parallel size) comes from
    the model's config.json, its own fields, or a known model (model/known.py)."""

    name: str | None = None
    family: str | None = None
    path: str | None = None
    tensor_parallel_size: int | None = None  # None: auto
    min_gpus: int = 1
    weights_gib: float | None = None
    weights_estimated: bool = False
    bytes_per_param: float = DEFAULT_BYTES_PER_PARAM
    kv_cache_gib_per_gpu: float | None = None
    kv_cache_fraction: float | None = None
    headroom_fraction: float = DEFAULT_HEADROOM_FRACTION
    attention_heads: int | None = None
    min_compute_capability: tuple[int, int] | None = None
    min_driver: str | None = None
    min_cuda: str | None = None
    shape: dict[str, Any] = field(default_factory=dict)
    # Where the shape's collectives per step come from ("the known model glm-5", "the model's config.json"),
    # and why they are not modelled when the model's config.json names an architecture the counts do not cover.
    shape_source: str | None = None
    shape_not_modelled: str | None = None

    @property
    def label(self) -> str:
        return self.name or self.family or self.path or "the model"


def read_deploy_model(model: Any, label: str = "model",
                      notes: list[str] | None = None) -> tuple[DeployModel, list[str]]:
    """The model to deploy with defaults filled in, and what is wrong with it.

    ``label`` is what the messages call the model: the variable the user wrote (``deploy_model``). What is read
    but should be written otherwise (the key ``comm_profile``, the former name of ``shape``) is said in ``notes``.
    """
    if not isinstance(model, dict):
        return DeployModel(), [f"{label}: expected a mapping (name, weights_gib, tensor_parallel_size, ...); found "
                               f"{type(model).__name__}"]
    problems = unknown_keys(model, MODEL_KEYS, label)
    deploy = DeployModel(name=as_text(model.get("name")), family=as_text(model.get("family")),
                         path=as_text(model.get("path")))

    def number(key: str, low: float, high: float | None = None, inclusive_low: bool = True) -> float | None:
        if model.get(key) is None:
            return None
        value = as_number(model[key])
        ok = value is not None and (value >= low if inclusive_low else value > low) and (high is None or value < high)
        if not ok:
            bound = f"{'at least' if inclusive_low else 'above'} {low:g}" + (f" and below {high:g}" if high else "")
            problems.append(f"{label}.{key}: expected a number {bound}; found {model[key]!r}")
            return None
        return value

    def whole(key: str, default: int | None) -> int | None:
        if model.get(key) is None:
            return default
        value = as_int(model[key])
        if value is None or value < 1:
            problems.append(f"{label}.{key}: expected a whole number of 1 or more; found {model[key]!r}")
            return default
        return value

    tp = model.get("tensor_parallel_size")
    if tp is None or (isinstance(tp, str) and tp.strip().lower() == "auto"):
        deploy.tensor_parallel_size = None
    else:
        deploy.tensor_parallel_size = whole("tensor_parallel_size", None)
        if deploy.tensor_parallel_size is None and not any(".tensor_parallel_size:" in p for p in problems):
            problems.append(f"{label}.tensor_parallel_size: expected a whole number or 'auto'; found {tp!r}")
    deploy.min_gpus = whole("min_gpus", 1) or 1
    heads_key = "attention_heads" if model.get("attention_heads") is not None else "num_attention_heads"
    deploy.attention_heads = whole(heads_key, None)

    weights = number("weights_gib", 0, inclusive_low=False)
    params = number("params_b", 0, inclusive_low=False)
    deploy.bytes_per_param = number("bytes_per_param", 0, inclusive_low=False) or DEFAULT_BYTES_PER_PARAM
    if weights is not None:
        deploy.weights_gib = weights
    elif params is not None:
        deploy.weights_gib = params * 1e9 * deploy.bytes_per_param / 2**30
        deploy.weights_estimated = True
    deploy.kv_cache_gib_per_gpu = number("kv_cache_gib_per_gpu", 0)
    deploy.kv_cache_fraction = number("kv_cache_fraction", 0, 1)
    headroom = number("memory_headroom_fraction", 0, 1)
    deploy.headroom_fraction = DEFAULT_HEADROOM_FRACTION if headroom is None else headroom
    kv_fraction = deploy.kv_cache_fraction if deploy.kv_cache_fraction is not None else DEFAULT_KV_CACHE_FRACTION
    if deploy.kv_cache_gib_per_gpu is None and kv_fraction + deploy.headroom_fraction >= 1:
        problems.append(f"{label}: kv_cache_fraction ({kv_fraction:g}) plus memory_headroom_fraction "
                        f"({deploy.headroom_fraction:g}) leave nothing for the weights; lower them")

    if model.get("min_compute_capability") is not None:
        deploy.min_compute_capability = versions.compute_capability(model["min_compute_capability"])
        if deploy.min_compute_capability is None:
            problems.append(f"{label}.min_compute_capability: expected a compute capability such as '8.0' or "
                            f"'sm_90'; found {model['min_compute_capability']!r}")
    for key in ("min_driver", "min_cuda"):
        value = model.get(key)
        if value is None:
            continue
        if versions.parse(value) is None:
            problems.append(f"{label}.{key}: expected a version such as '570' or '12.8' (quote it in YAML); "
                            f"found {value!r}")
        else:
            setattr(deploy, key, str(value) if not isinstance(value, float) else repr(value))
    written, shape = _shape_key(model, label, problems, notes)
    if written is not None:
        problems.extend(_shape_problems(shape, f"{label}.{written}"))
    deploy.shape = _shape_fields(model, shape, deploy)
    return deploy, problems


def _shape_key(model: dict[str, Any], label: str, problems: list[str],
               notes: list[str] | None) -> tuple[str | None, Any]:
    """The key the shape was written under (``shape``, or its former name ``comm_profile``, read with a note) and
    its value; (None, None) without either."""
    shape, former = model.get("shape"), model.get(FORMER_SHAPE_KEY)
    if former is None:
        return ("shape", shape) if shape is not None else (None, None)
    if notes is not None:
        notes.append(f"{label}.{FORMER_SHAPE_KEY} is the former name of {label}.shape: it is read as shape; write "
                     "shape instead")
    if shape is None:
        return FORMER_SHAPE_KEY, former
    if _same_shape(shape, former):
        return "shape", shape
    problems.append(f"{label}: shape and {FORMER_SHAPE_KEY} (its former name) differ ({shape!r} and {former!r}); "
                    f"keep shape only")
    return "shape", shape


def _same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().lower() == b.strip().lower()
    return bool(a == b)


def _shape_problems(value: Any, where: str) -> list[str]:
    """What is wrong with the shape: read as absent, a misspelled one would drop the ceiling without a word."""
    if value is None or (isinstance(value, str) and value.strip().lower() in KNOWN_MODELS):
        return []
    if isinstance(value, dict):
        return unknown_keys(value, SHAPE_KEYS, where)
    known = ", ".join(sorted(KNOWN_MODELS))
    suggestion = closest(value.strip().lower(), KNOWN_MODELS) if isinstance(value, str) else None
    return [f"{where}: expected a known model ({known}) or a mapping of the model's shape (name, layers, "
            f"hidden_size, allreduces_per_layer, dtype_bytes); found {value!r}"
            + (f"; did you mean {suggestion}?" if suggestion else "")]


def _shape_fields(model: dict[str, Any], key: Any, deploy: DeployModel) -> dict[str, Any]:
    """The model's all-reduce shape: its own fields, its ``shape`` (``key``: a known model by name, or a mapping), or
    the family's known model."""
    base: dict[str, Any] = {}
    source = None
    if isinstance(key, dict):
        base = dict(key)
        source = "the model's shape"
    else:
        for candidate in (key, deploy.family, deploy.name):
            if isinstance(candidate, str) and candidate.strip().lower() in KNOWN_MODELS:
                base = dict(KNOWN_MODELS[candidate.strip().lower()])
                source = f"the known model {candidate.strip().lower()}"
                break
    inline = [name for name in ("layers", "hidden_size", "allreduces_per_layer", "dtype_bytes")
              if model.get(name) is not None]
    for name in inline:
        base[name] = as_int(model[name]) if as_int(model[name]) is not None else model[name]
    if inline:
        source = "the model's own fields" + (f" over {source}" if source else "")
    if not base.get("layers") or not base.get("hidden_size"):
        return {}
    deploy.shape_source = source
    base.setdefault("allreduces_per_layer", 2)
    base.setdefault("dtype_bytes", 2)
    base.setdefault("name", deploy.label)
    return {k: base[k] for k in ("name", "layers", "allreduces_per_layer", "hidden_size", "dtype_bytes",
                                 "extra_allreduces") if k in base}
