"""gpudash's benchmarks: one harness (``benchmarks.harness``), the cases it runs (declared in
``benchmarks/catalog.toml``, their measuring code in ``benchmarks.cases``), the jobs some of them
measure (``benchmarks.jobs``) and the page built from their results (``benchmarks.page``).
``python -m benchmarks list`` names every case."""
