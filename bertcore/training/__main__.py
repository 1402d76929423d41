"""``python -m bertcore.training``: the training command line (:mod:`bertcore.training.cli`)."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
