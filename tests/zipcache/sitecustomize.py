"""Loads gpuhost_zipcache (the bytecode cache for modules imported from zip archives) in interpreters started with
this directory on PYTHONPATH: the fleet tests' ansible-playbook runs and the modules they run."""

import gpuhost_zipcache  # noqa: F401
