"""The reference pages under docs/reference/, rendered from the sources they describe.

One module per kind of page (modules, roles, playbooks, findings), the Ansible markup and the Markdown
helpers they share, and generate.py that lists every page and compares them with the files on disk.
scripts/docs_reference.py is the command line.
"""
