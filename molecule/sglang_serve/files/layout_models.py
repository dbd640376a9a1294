#!/usr/bin/python3
"""Lay out the test model directories under /models, as a download would leave them (sparse weights).

GLM-5-NVFP4  the model: config and five 81 GiB shards, 405 GiB as its profile says
partial      the same download stopped after two shards
private      the right size, in a file only root can read
"""

from __future__ import annotations

import json
import os

GIB = 1024**3
MODELS = {
    "GLM-5-NVFP4": [(f"model-0000{i}-of-00005.safetensors", 81, 0o644) for i in range(1, 6)],
    "partial": [(f"model-0000{i}-of-00005.safetensors", 81, 0o644) for i in range(1, 3)],
    "private": [("model.safetensors", 405, 0o600)],
}
CONFIG = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa"}

for name, shards in MODELS.items():
    directory = os.path.join("/models", name)
    os.makedirs(directory, mode=0o755, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w", encoding="utf-8") as handle:
        json.dump(CONFIG, handle)
    for shard, gib, mode in shards:
        path = os.path.join(directory, shard)
        with open(path, "wb") as handle:
            handle.truncate(gib * GIB)  # sparse: the size without the disk space
        os.chmod(path, mode)
print("laid out /models")
