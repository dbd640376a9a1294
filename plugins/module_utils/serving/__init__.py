"""Provisioning and serving helpers: stack profiles, CUDA extension build planning,
model directory checks, the SGLang smoke test."""
