"""Shared code of the GPU host audit and deployment, one sub-package per concern.

parsers/ (tool outputs to typed data), findings/ (the findings catalog), audit/ (reading a
host), rules/ (facts to findings), bench/ (P2P and NCCL benchmarks), gate/ (the deployment
verdict), serving/ (provisioning and serving helpers), report/ (Markdown, JSON, charts). Imports
flow one way, down the layers that tests/unit/test_architecture.py declares.
"""
