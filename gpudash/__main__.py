"""``python -m gpudash``: the same as the ``gpudash`` command."""

import sys

from gpudash.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
