"""Benchmarks: the shipped harnesses and the code that runs them (I/O), and the judges
and models that read their results (pure)."""
