"""The sections of ``docs/BENCHMARKS.md``, one module each, and the readers of the results they quote
(``sweeps``: the published sweeps; ``outputs``: the benchmark scripts' printed outputs).
``benchmarks/benchmarks_page.py`` puts the page together."""
