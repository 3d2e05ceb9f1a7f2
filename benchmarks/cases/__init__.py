"""The benchmark cases, a module each (or a few related cases in one): every module here declares
its cases in ``CASES``; ``registry`` collects them."""
