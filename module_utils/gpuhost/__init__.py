"""Shared code of the GPU host audit: one file per concern, no Ansible imports below facts.py."""
