"""trainer.evaluate: a run's model.pt evaluated again with the trainer's own code equals what the run reported."""

import json
import sys

import boto3
import torch

from trainer.datasets import export, export_corpus
from trainer.evaluate import EXIT_DIFFERS, EXIT_UNREADABLE, main, split_location
from trainer.metrics import parse_evaluate_line, parse_result_line
from trainer.snapshot import from_bytes, to_bytes
from trainer.tests.conftest import base_env, run_cmd, torchrun


def _evaluate(args, env=None):
    proc = run_cmd([sys.executable, "-m", "trainer.evaluate", *args], env=env or base_env())
    lines = [parse_evaluate_line(line) for line in proc.stdout.splitlines() if line.startswith("trainfleet-evaluate:")]
    return proc, (lines[0] if lines else None)


def _result(proc):
    return next(parse_result_line(line) for line in proc.stdout.splitlines() if line.startswith("trainfleet-result:"))


def test_a_two_process_run_evaluates_to_its_reported_accuracy(tmp_path):
    """Two real processes train on an exported dataset; the evaluation of their model.pt (one process,
    the run's two shards) gives the run's own final accuracy and loss."""
    data = tmp_path / "wine"
    export("wine", str(data), "csv", parts=2)
    out = tmp_path / "out"
    proc = torchrun(["--dataset", f"dir:{data}", "--epochs", "3", "--backend", "gloo", "--output-dir", str(out)])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = _result(proc)
    evaluated, line = _evaluate([str(out)])
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    assert line["world_size"] == 2 and line["epoch"] == 3 and line["agrees"]
    assert abs(line["accuracy"] - run["final_accuracy"]) <= 1e-6 and line["reported_accuracy"] == run["final_accuracy"]
    assert abs(line["loss"] - run["final_test_loss"]) <= 1e-6
    assert line["samples"] == round(178 * 0.2)

    # a model.pt whose recorded accuracy is not what its weights give: exit 1, naming both numbers
    artifact = from_bytes((out / "model.pt").read_bytes())
    artifact["test_acc"] = run["final_accuracy"] - 0.25
    (tmp_path / "tampered").mkdir()
    (tmp_path / "tampered" / "model.pt").write_bytes(to_bytes(artifact))
    differs, line = _evaluate([str(tmp_path / "tampered" / "model.pt")])
    assert differs.returncode == EXIT_DIFFERS and line["agrees"] is False
    assert "differs from the run's reported" in differs.stderr and repr(artifact["test_acc"]) in differs.stderr


def test_the_transformer_on_text_shards_from_s3(tmp_path, aws_env, moto_server):
    """The tiny transformer trained on corpus shards in S3, its outputs in S3: evaluated from S3."""
    s3 = boto3.client("s3", endpoint_url=moto_server, region_name="us-east-1")
    s3.create_bucket(Bucket="evaluate")
    export_dir = tmp_path / "corpus"
    for path in export_corpus(str(export_dir), parts=2, max_bytes=16384):
        s3.upload_file(path, "evaluate", "data/corpus/" + path.rsplit("/", 1)[1])
    env = base_env(**aws_env)
    proc = torchrun(["--model", "transformer", "--model-size", "tiny", "--seq-len", "32", "--dataset", "s3://evaluate/data/corpus/",
                     "--corpus-bytes", "16384", "--epochs", "1", "--batch-size", "16", "--data-cache-dir", str(tmp_path / "cache"),
                     "--output-dir", "s3://evaluate/runs/lm"], nproc=1, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = _result(proc)
    evaluated, line = _evaluate(["s3://evaluate/runs/lm/model.pt", "--data-cache-dir", str(tmp_path / "cache2")], env=env)
    assert evaluated.returncode == 0, evaluated.stdout[-2000:] + evaluated.stderr[-2000:]
    assert abs(line["accuracy"] - run["final_accuracy"]) <= 1e-6 and "perplexity" in line


def test_what_cannot_be_read_is_exit_2_saying_why(tmp_path, capsys):
    assert main([str(tmp_path / "nothing")]) == EXIT_UNREADABLE
    assert "cannot read" in capsys.readouterr().err
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.pt").write_bytes(to_bytes({"weights": torch.zeros(1)}))
    assert main([str(tmp_path / "bad")]) == EXIT_UNREADABLE
    assert "lacks config, model_spec, state_dict, test_acc" in capsys.readouterr().err
    assert main([str(tmp_path / "bad"), "--tolerance", "nan"]) == EXIT_UNREADABLE
    assert "--tolerance" in capsys.readouterr().err


def test_model_location_forms():
    assert split_location("s3://b/runs/x/model.pt") == ("s3://b/runs/x", "model.pt")
    assert split_location("s3://b/runs/x/") == ("s3://b/runs/x", "model.pt")
    assert split_location("/data/outputs/x") == ("/data/outputs/x", "model.pt")
    assert split_location("/data/outputs/x/model.pt") == ("/data/outputs/x", "model.pt")
    assert json.dumps(split_location("out")) == '["out", "model.pt"]'
