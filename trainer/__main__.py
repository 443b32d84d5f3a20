"""``python -m trainer``: the trainer's command line, the same as ``python -m trainer.train``."""

from trainer.train import exit_now, main

if __name__ == "__main__":
    exit_now(main())
