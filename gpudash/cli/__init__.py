"""The command line's entry: the parsers of every command (`options`), `main` (the dispatch), each
command's handler (`commands/`) and the browser view (`gpudash serve`). What their arguments share
lives one floor down, in `gpudash/arguments/`."""
