"""``python3 -m trainer.launch ARGS``: torchrun, with one compatibility fix, same arguments.

torch < 2.0 on Python 3.11 (Debian bookworm's python3-torch 1.13) cannot start any worker: its
``Std.from_str`` looks values up by iterating an IntFlag, and Python 3.11 no longer yields the zero
member (NONE) nor multi-bit aliases (ALL) that way, so the default ``--redirects 0`` / ``--tee 0``
become None and torchrun dies with "'NoneType' object has no attribute 'get'" (fixed upstream in
torch 2.0). This wrapper replaces ``Std.from_str`` with a direct lookup when, and only when, the
installed torch has that bug, then runs ``torch.distributed.run.main``. On a fixed torch it is
exactly torchrun.
"""

import re
import sys

from torch.distributed.elastic.multiprocessing import api as mp_api
from torch.distributed.run import main as torchrun_main

_VALUE = re.compile(r"^[0123]$")
_MAPPING = re.compile(r"^(\d:[0123],)*(\d:[0123])$")


def _from_str(value):
    """The documented behaviour of Std.from_str: "0" -> NONE, "3" -> ALL, "0:3,1:0" -> {0: ALL, 1: NONE}."""
    std = mp_api.Std
    if _VALUE.match(value):
        return std(int(value))
    if _MAPPING.match(value):
        return {int(i): std(int(v)) for i, v in (item.split(":") for item in value.split(","))}
    raise ValueError(f"{value} does not match: <{_VALUE.pattern}> or <{_MAPPING.pattern}>")


def needs_std_fix():
    """True when this torch's Std.from_str loses the NONE/ALL values (torch < 2.0 on Python >= 3.11)."""
    try:
        return mp_api.Std.from_str("0") is None or mp_api.Std.from_str("3") is None
    except Exception:  # pylint: disable=broad-except
        return True


def apply_fixes():
    if needs_std_fix():
        mp_api.Std.from_str = staticmethod(_from_str)


def main(argv=None):
    apply_fixes()
    torchrun_main(argv if argv is not None else sys.argv[1:])


if __name__ == "__main__":
    main()
