"""What holds a training step back: the evidence a diagnosis window measures (``evidence``), the
rules that classify it (``rules``) into a verdict (``verdict``), what to try next (``advice``), what
each fix is worth (``parts``, ``remedies``), the verdict judged again with the GPU's telemetry
(``telemetry``); a peak of memory and an out-of-memory error explained. Torch-free."""
