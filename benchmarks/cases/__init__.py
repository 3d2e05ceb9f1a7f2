"""The benchmark cases' measuring code, a module each (or a few related cases in one): the cases
themselves, their claims and doc anchors, are declared in ``benchmarks/catalog.toml``."""
