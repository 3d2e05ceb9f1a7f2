"""Each command's handler, one module each, called by ``gpudash.cli.main`` with the options given:
run (the dashboard and ``record``), job (a job after ``--``), diagnose, watch, serve, replay,
listing (``list``) and passthrough (``sweep``, ``tune`` and ``report``, which parse their own).
Each imports what its command runs (torch-free; Textual only for a dashboard) when it runs."""
