"""Text for the transformer: the built-in ``corpus`` dataset, byte tokens and next-token windows.

The corpus is English prose that every trainer image already holds: the docstrings of the Python
standard library that runs the trainer (modules, classes and functions of every ``*.py`` under
``sysconfig``'s stdlib path, in sorted path order; tests, idlelib and site-packages left out). The
Python Software Foundation licenses that text under the PSF License 2.0, which permits copying and
derived works. A different Python version gives a somewhat different corpus; the result line names
the corpus's size.

``python -m trainer.datasets export corpus DIR`` writes this corpus as text shards (part-NNN.txt), the
form of a ``dir:`` or ``s3://`` text dataset (read_shards), which the dataset step stages like any other.

Tokens are bytes (vocabulary 256): no tokenizer file to ship or version, and any UTF-8 text works.
A text of N tokens gives N // (seq_len + 1) windows; window w is the input w[:-1] and the target
w[1:] (every position predicts the next byte).
"""

import ast
import os
import sysconfig

import numpy as np

VOCAB = 256
SKIP_DIRS = {"test", "tests", "idlelib", "site-packages", "dist-packages", "__pycache__", "lib2to3", "turtledemo"}


def stdlib_docstrings(root=None, max_bytes=2 << 20):
    """The stdlib's docstrings joined by blank lines, as UTF-8 bytes (at most ``max_bytes``)."""
    root = root or sysconfig.get_paths()["stdlib"]
    parts, size = [], 0
    for directory, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        for name in sorted(f for f in files if f.endswith(".py")):
            try:
                with open(os.path.join(directory, name), "rb") as handle:
                    tree = ast.parse(handle.read())
            except (OSError, SyntaxError, ValueError):
                continue
            for node in ast.walk(tree):
                if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                    doc = ast.get_docstring(node)
                    if doc and len(doc) >= 40:
                        data = doc.encode("utf-8", "replace")
                        parts.append(data)
                        size += len(data) + 2
                        if size >= max_bytes:
                            return b"\n\n".join(parts)[:max_bytes]
    return b"\n\n".join(parts)


def read_shards(paths, max_bytes=2 << 20):
    """Text shards (``*.txt``, UTF-8, in the order given: data_files sorts them) joined by blank lines,
    as bytes, at most ``max_bytes``: the transformer's ``dir:`` and ``s3://`` datasets."""
    parts, size = [], 0
    for path in paths:
        with open(path, "rb") as handle:
            data = handle.read(max_bytes - size + 1)
        parts.append(data)
        size += len(data) + 2
        if size >= max_bytes:
            break
    return b"\n\n".join(parts)[:max_bytes]


def tokenize(data):
    """Byte tokens of ``data`` (bytes or str) as an int64 array."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    return np.frombuffer(data, dtype=np.uint8).astype(np.int64)


def windows(tokens, seq_len):
    """(x, y): non-overlapping windows of seq_len + 1 tokens; x = all but the last, y = all but the first."""
    count = len(tokens) // (seq_len + 1)
    table = np.asarray(tokens[:count * (seq_len + 1)], dtype=np.int64).reshape(count, seq_len + 1)
    return np.ascontiguousarray(table[:, :-1]), np.ascontiguousarray(table[:, 1:])


def synthetic_tokens(count, seed):
    """Random byte tokens (throughput benchmarks: the model learns nothing from them)."""
    return np.random.default_rng(seed + 104729).integers(0, VOCAB, size=count, dtype=np.int64)
