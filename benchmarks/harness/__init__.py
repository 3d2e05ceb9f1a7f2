"""The benchmark harness: cases declared once, in ``benchmarks/catalog.toml`` (``case``, ``catalog``),
run on one schedule (``schedule``), stamped one way (``stamp``), judged by gpudash's statistics
(``stats``), kept as versioned JSON (``result``) and written out as Markdown (``render``).
``python -m benchmarks`` is its entry point (``cli``)."""
