"""``python -m trainer``: the trainer's command line, the same as ``python -m trainer.train``."""

import sys

from trainer.train import main

if __name__ == "__main__":
    sys.exit(main())
