"""The deployment gate: typed inputs, GPU placement, known-good launch settings and the verdict. Pure."""
