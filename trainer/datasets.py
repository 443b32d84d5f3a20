"""Real small datasets as files the trainer's ``dir:`` and ``s3://`` datasets read.

    python -m trainer.datasets export breast_cancer DIR [--format csv|npz] [--parts N]
    python -m trainer.datasets export corpus DIR [--parts N] [--bytes N]
    python -m trainer.datasets list

scikit-learn ships these offline (no download): ``wine`` (178 samples, 13 features, 3 classes),
``breast_cancer`` (569 samples, 30 features, 2 classes), ``iris`` (150, 4, 3) and ``digits``
(1797, 64, 10). The export writes the trainer's file format (trainer/data.py): CSV with a header
row of feature names and the integer label in the LAST column, or ``.npz`` with ``X`` and ``y``,
split into ``--parts`` files (part-000.csv, ...) in a fixed order, plus ``dataset.json`` (name,
counts, feature and class names; the trainer ignores it). Exporting twice gives byte-identical
files, so staging the same export again uploads nothing.

``corpus`` is text, for ``--model transformer``: the trainer's built-in corpus (trainer.text: the
docstrings of the Python standard library that runs the export, PSF License 2.0), at most
``--bytes``, cut into ``--parts`` UTF-8 shards (part-000.txt, ...) at blank lines (read back in order,
they are the corpus byte for byte), plus
``dataset.json`` (source, license, Python version, bytes). Staged like the others, a job trains on it
with ``--model transformer --dataset dir:...`` or ``s3://...``.
"""

import argparse
import json
import os
import re
import sys
import zipfile

import numpy as np

LOADERS = {
    "wine": "load_wine",
    "breast_cancer": "load_breast_cancer",
    "iris": "load_iris",
    "digits": "load_digits",
}
FORMATS = ("csv", "npz")
MAX_PARTS = 64
TEXT = "corpus"


class ExportError(Exception):
    """The export cannot be written (bad name, bad directory...)."""


def load(name):
    """(X float32, y int64, feature names, class names) of a scikit-learn bundled dataset."""
    if name not in LOADERS:
        raise ExportError(f"unknown dataset {name!r}: expected one of {', '.join(sorted(LOADERS))}")
    import sklearn.datasets  # pylint: disable=import-outside-toplevel

    bunch = getattr(sklearn.datasets, LOADERS[name])()
    x = np.asarray(bunch.data, dtype=np.float32)
    y = np.asarray(bunch.target, dtype=np.int64)
    features = [str(f) for f in getattr(bunch, "feature_names", [])] or [f"f{i}" for i in range(x.shape[1])]
    classes = [str(c) for c in getattr(bunch, "target_names", range(int(y.max()) + 1))]
    return x, y, features, classes


def _column(name):
    """A CSV header cell: letters, digits and _ only (no comma, quote or space to escape)."""
    return re.sub(r"[^A-Za-z0-9_]+", "_", name).strip("_") or "f"


def _csv_text(x, y, header):
    rows = [",".join(header)]
    for features, label in zip(x, y):
        # repr of a float32 widened to float64 is exact and stable across runs.
        rows.append(",".join(repr(float(v)) for v in features) + f",{int(label)}")
    return "\n".join(rows) + "\n"


def _write(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as handle:
        handle.write(data)
    os.replace(tmp, path)


def _write_npz(path, arrays):
    """An .npz (what np.load reads) with fixed zip timestamps, so the same arrays give the same bytes."""
    tmp = path + ".tmp"
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_STORED) as archive:
        for key, array in arrays.items():
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w") as member:
                np.lib.format.write_array(member, np.ascontiguousarray(array), allow_pickle=False)
    os.replace(tmp, path)


def _check_parts(parts):
    if isinstance(parts, bool) or not isinstance(parts, int) or not 1 <= parts <= MAX_PARTS:
        raise ExportError(f"--parts must be an integer between 1 and {MAX_PARTS}, got {parts!r}")


def export_corpus(directory, parts=1, max_bytes=2 << 20):
    """The built-in corpus as ``parts`` text shards cut at paragraph breaks; returns the files written."""
    from trainer import text  # pylint: disable=import-outside-toplevel

    _check_parts(parts)
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or not 1024 <= max_bytes <= 64 << 20:
        raise ExportError(f"--bytes must be an integer between 1024 and {64 << 20}, got {max_bytes!r}")
    data = text.stdlib_docstrings(max_bytes=max_bytes)
    paragraphs = data.split(b"\n\n")
    if parts > len(paragraphs):
        raise ExportError(f"--parts {parts} is more than the {len(paragraphs)} paragraphs of the corpus")
    os.makedirs(directory, exist_ok=True)
    written = []
    for index, chunk in enumerate(np.array_split(np.arange(len(paragraphs)), parts)):
        path = os.path.join(directory, f"part-{index:03d}.txt")
        # no newline at the end: the shards read back (trainer.text.read_shards joins them by a blank
        # line) are the corpus byte for byte, so dir:/s3:// trains on exactly what corpus does
        _write(path, b"\n\n".join(paragraphs[i] for i in chunk))
        written.append(path)
    meta = {"name": TEXT, "source": "docstrings of the Python standard library (trainer.text.stdlib_docstrings)",
            "license": "PSF License 2.0", "python": sys.version.split()[0], "format": "txt", "bytes": len(data),
            "files": [os.path.basename(p) for p in written]}
    meta_path = os.path.join(directory, "dataset.json")
    _write(meta_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return written + [meta_path]


def export(name, directory, fmt="csv", parts=1):
    """Write the dataset into ``directory``; returns the list of files written (data files first)."""
    if fmt not in FORMATS:
        raise ExportError(f"unknown format {fmt!r}: expected one of {', '.join(FORMATS)}")
    _check_parts(parts)
    x, y, features, classes = load(name)
    if parts > len(x):
        raise ExportError(f"--parts {parts} is more than the {len(x)} samples of {name}")
    os.makedirs(directory, exist_ok=True)
    header = [_column(f) for f in features] + ["label"]
    written = []
    for index, idx in enumerate(np.array_split(np.arange(len(x)), parts)):
        path = os.path.join(directory, f"part-{index:03d}.{fmt}")
        if fmt == "csv":
            _write(path, _csv_text(x[idx], y[idx], header).encode("utf-8"))
        else:
            _write_npz(path, {"X": x[idx], "y": y[idx]})
        written.append(path)
    meta = {"name": name, "source": f"sklearn.datasets.{LOADERS[name]}", "format": fmt, "samples": int(len(x)),
            "features": int(x.shape[1]), "classes": int(len(classes)), "feature_names": features,
            "class_names": classes, "files": [os.path.basename(p) for p in written]}
    meta_path = os.path.join(directory, "dataset.json")
    _write(meta_path, (json.dumps(meta, indent=2, sort_keys=True) + "\n").encode("utf-8"))
    return written + [meta_path]


def build_parser():
    p = argparse.ArgumentParser(prog="python -m trainer.datasets", description=__doc__.split("\n", 1)[0])
    sub = p.add_subparsers(dest="command", required=True)
    e = sub.add_parser("export", help="write a bundled dataset in the trainer's dir: format")
    e.add_argument("name", help=" | ".join(sorted(LOADERS) + [TEXT]))
    e.add_argument("directory", help="directory to write (created if missing)")
    e.add_argument("--format", default="csv", help="csv | npz (default: %(default)s)")
    e.add_argument("--parts", type=int, default=2, help=f"number of data files, 1..{MAX_PARTS} (default: %(default)s)")
    e.add_argument("--bytes", type=int, default=2 << 20, help=f"{TEXT}: bytes of text at most (default: %(default)s)")
    sub.add_parser("list", help="the datasets this can export")
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command == "list":
        for name in sorted(LOADERS):
            x, _y, _f, classes = load(name)
            print(f"{name}: {x.shape[0]} samples, {x.shape[1]} features, {len(classes)} classes")
        print(f"{TEXT}: text shards of the Python standard library's docstrings, for --model transformer")
        return 0
    try:
        if args.name == TEXT:
            files = export_corpus(args.directory, args.parts, args.bytes)
        else:
            files = export(args.name, args.directory, args.format, args.parts)
    except (ExportError, OSError) as exc:
        print(f"trainer.datasets: {exc}", file=sys.stderr)
        return 2
    if args.name == TEXT:
        print(f"{TEXT}: {sum(os.path.getsize(f) for f in files[:-1])} bytes -> "
              f"{', '.join(os.path.basename(f) for f in files)} in {args.directory} "
              f"(train with --model transformer --dataset=dir:{os.path.abspath(args.directory)})")
        return 0
    x, _y, _f, classes = load(args.name)
    print(f"{args.name}: {x.shape[0]} samples, {x.shape[1]} features, {len(classes)} classes -> "
          f"{', '.join(os.path.basename(f) for f in files)} in {args.directory} "
          f"(train with --dataset=dir:{os.path.abspath(args.directory)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
