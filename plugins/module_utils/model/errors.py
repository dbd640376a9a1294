"""The one error of the model package: what was expected, what was found and what to do."""

from __future__ import annotations


class ModelError(ValueError):
    """A model (a config.json, a mapping, a known model's name) or a latency curve that cannot be used."""
