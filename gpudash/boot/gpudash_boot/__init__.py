"""gpudash inside a training process: the job's hooks (``hooks.py``, imported by the bootstrap beside
this package, ``sitecustomize.py``, once the job imports torch) and the standard-library modules that
both sides import: the wire (``wire.py``: the environment's names, the messages' kinds, a step
record's fields), the sync sites (``sync_sites.py``, ``sync_table.py``), the FLOP count
(``flop_count.py``) and the rest that gpudash's own step loop shares with a job's hooks. Standard
library and the process's own torch only: a job's Python needs no gpudash. In a job it is
``gpudash_boot``, the one name of gpudash's that its modules see; in gpudash,
``gpudash.boot.gpudash_boot``."""
