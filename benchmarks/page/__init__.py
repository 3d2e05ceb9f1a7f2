"""docs/BENCHMARKS.md: a module per section (``build`` puts them together) and the readers of the
results they quote (``sweeps``: the published sweeps; ``outputs``: the cases' published results)."""
