"""A model: its shape (read from its config.json or given as data), the all-reduces it runs per decoded
token under tensor parallelism, the models shipped with the collection, and its communication ceiling at a
tensor-parallel size (the most tokens per second all-reduce alone lets a single stream decode).

Pure: no Ansible, no I/O (callers read config.json). Every error is ``errors.ModelError``.
"""
