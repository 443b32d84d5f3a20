"""Execute a notebook without a browser (installed as /usr/local/bin/trainfleet-run-notebook).

    trainfleet-run-notebook NOTEBOOK OUTPUT [--timeout S]

Runs every cell of NOTEBOOK with nbclient in the ``python3`` kernel (the image's venv python; its
sockets encrypted with CurveZMQ), in the current directory, each cell within S seconds (default 600), and writes the executed notebook, with
its outputs, to OUTPUT (also when a cell failed: up to the failing cell). Every line of the cells'
stream outputs that starts with ``trainfleet-evaluate:`` is printed to stdout, in cell order, so a
caller (a Job's log, the Ansible side) reads the result without opening the notebook.

Exit 0 when every cell ran; 1 when a cell raised, timed out or the kernel died (one line on stderr:
the cell and the error's name and message); 2 for bad arguments or a notebook that cannot be read or
written.
"""

import argparse
import math
import os
import re
import sys

EVALUATE_PREFIX = "trainfleet-evaluate:"
PROG = "trainfleet-run-notebook"
EXIT_CELL_FAILED = 1
EXIT_USAGE = 2


def one_line(text):
    return re.sub(r"\s*\n\s*", " ", str(text)).strip()


def fail(message, code):
    sys.stderr.write(f"{PROG}: error: {one_line(message)}\n")
    sys.stderr.flush()
    return code


def positive_seconds(value):
    try:
        seconds = float(value)
    except ValueError:
        seconds = float("nan")
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {value!r}")
    return seconds


def build_parser():
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n", 1)[0])
    p.add_argument("notebook", help="the notebook to run (.ipynb)")
    p.add_argument("output", help="where to write the executed notebook")
    p.add_argument("--timeout", type=positive_seconds, default=600.0,
                   help="seconds each cell may run (default: %(default)s)")
    return p


def stream_lines(nb, prefix=EVALUATE_PREFIX):
    """Lines of the notebook's stream outputs that start with ``prefix``, in cell order."""
    found = []
    for cell in nb.cells:
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if output.get("output_type") == "stream":
                text = output.get("text", "")
                text = "".join(text) if isinstance(text, list) else text
                found.extend(line for line in text.splitlines() if line.startswith(prefix))
    return found


def failed_cell(nb):
    """(number, counting from 1, ename, evalue) of the first cell with an error output, or None."""
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            if output.get("output_type") == "error":
                return index + 1, output.get("ename", "Error"), output.get("evalue", "")
    return None


def main(argv=None):
    args = build_parser().parse_args(argv)  # exits 2 on bad arguments
    import nbformat  # pylint: disable=import-outside-toplevel
    from nbclient import NotebookClient  # pylint: disable=import-outside-toplevel
    from nbclient.exceptions import CellExecutionError, CellTimeoutError, DeadKernelError  # pylint: disable=import-outside-toplevel
    from traitlets.config import Config  # pylint: disable=import-outside-toplevel

    try:
        nb = nbformat.read(args.notebook, as_version=4)
    except (OSError, ValueError) as exc:  # nbformat's NotJSONError is a ValueError
        return fail(f"cannot read {args.notebook}: {exc}", EXIT_USAGE)
    out_dir = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(out_dir) or not os.access(out_dir, os.W_OK):
        return fail(f"cannot write {args.output}: {out_dir} is not a writable directory", EXIT_USAGE)

    # The kernel's sockets encrypted (CurveZMQ), as the server's configuration in the image has them.
    config = Config({"KernelManager": {"transport_encryption": "auto"}})
    client = NotebookClient(nb, timeout=args.timeout, kernel_name="python3", config=config,
                            resources={"metadata": {"path": os.getcwd()}})
    error = None
    try:
        client.execute()
    except CellExecutionError as exc:
        where = failed_cell(nb)
        error = (f"cell {where[0]} of {len(nb.cells)} raised {where[1]}: {where[2]}" if where
                 else f"a cell raised {getattr(exc, 'ename', 'Error')}: {getattr(exc, 'evalue', exc)}")
    except CellTimeoutError as exc:
        error = f"a cell timed out after {args.timeout:g} s: {exc.__class__.__name__}: {exc}"
    except DeadKernelError as exc:
        error = f"the kernel died: {exc.__class__.__name__}: {exc}"
    except RuntimeError as exc:  # the kernel did not start
        error = f"the kernel failed: {exc.__class__.__name__}: {exc}"
    try:
        nbformat.write(nb, args.output)
    except OSError as exc:
        return fail(f"cannot write {args.output}: {exc}", EXIT_USAGE)
    for line in stream_lines(nb):
        sys.stdout.write(line + "\n")
    sys.stdout.flush()
    if error:
        return fail(error, EXIT_CELL_FAILED)
    return 0


if __name__ == "__main__":
    sys.exit(main())
