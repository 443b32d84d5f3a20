"""The GPU-facing parts of the trainer, on the CPU: precision, torch.compile gate, one process per GPU,
data placement, the transformer and its text. The same code runs on a GPU in benchmarks/trainer_gpu.py."""

import json
import math
import sys

import numpy as np
import pytest
import torch

from trainer import text
from trainer.config import MODEL_SIZES, ConfigError, TrainConfig
from trainer.data import load_split
from trainer.datasets import export_corpus
from trainer.dist import DistContext, check_local_gpus, local_size
from trainer.loop import batches, check_environment, compile_unsupported, evaluate, flat_loss, place_data, set_precision, shard_order
from trainer.metrics import parse_epoch_line, parse_result_line
from trainer.model import TRANSFORMER_SIZES, build_model, model_spec, transformer_flops_per_sample
from trainer.tests.conftest import REPO_ROOT, base_env, run_cmd, torchrun


@pytest.mark.parametrize("local_rank, processes, gpus", [(0, 2, 1), (1, 2, 1), (0, 1, 0), (3, 1, 2)])
def test_more_processes_than_gpus_names_nproc_per_node(local_rank, processes, gpus):
    with pytest.raises(ConfigError) as err:
        check_local_gpus(local_rank, processes, gpus)
    assert err.value.argument == "--nproc-per-node"
    assert f"torch sees {gpus} GPU(s)" in str(err.value) and "expected at most" in str(err.value)


@pytest.mark.parametrize("local_rank, processes, gpus", [(0, 1, 1), (1, 2, 2), (0, 2, 8)])
def test_one_process_per_gpu_is_fine(local_rank, processes, gpus):
    check_local_gpus(local_rank, processes, gpus)


def test_local_size_reads_each_launcher():
    assert local_size({}) == 1
    assert local_size({"RANK": "0", "WORLD_SIZE": "4", "LOCAL_WORLD_SIZE": "2"}) == 2
    assert local_size({"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_LOCAL_SIZE": "4",
                       "MASTER_ADDR": "x"}) == 4


def test_compile_gate_says_what_is_missing():
    def none(*_args):
        return None
    assert "C compiler" in compile_unsupported(False, which=none)
    assert compile_unsupported(False, which=lambda name: "/usr/bin/" + name) is None
    assert "triton" in compile_unsupported(True, find_spec=none)
    assert compile_unsupported(True, find_spec=lambda name: object()) is None


def test_environment_refuses_cuda_modes_on_the_cpu(monkeypatch, tmp_path):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError) as err:
        check_environment(TrainConfig(precision="tf32", output_dir=str(tmp_path)))
    assert err.value.argument == "--precision" and "CPU" in str(err.value)
    with pytest.raises(ConfigError) as err:
        check_environment(TrainConfig(device="cuda", output_dir=str(tmp_path)))
    assert err.value.argument == "--device" and "no CUDA device" in str(err.value)
    check_environment(TrainConfig(precision="bf16", output_dir=str(tmp_path)))


def test_precision_contexts_on_the_cpu():
    cpu = torch.device("cpu")
    with set_precision("bf16", cpu)():
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.bfloat16
    with set_precision("fp32", cpu)():
        assert (torch.ones(4, 4) @ torch.ones(4, 4)).dtype == torch.float32


@pytest.mark.parametrize("samples, world", [(10, 1), (10, 3), (7, 2), (2, 5), (1, 4), (64, 4)])
def test_shard_order_is_distributed_samplers_order(samples, world):
    from torch.utils.data import DistributedSampler  # pylint: disable=import-outside-toplevel

    for rank in range(world):
        for seed, epoch in ((0, 1), (5, 3)):
            sampler = DistributedSampler(range(samples), num_replicas=world, rank=rank, shuffle=True, seed=seed, drop_last=False)
            sampler.set_epoch(epoch)
            assert shard_order(samples, world, rank, seed, epoch).tolist() == list(sampler)


def test_place_data_leaves_cpu_data_alone(tmp_path):
    split = load_split(TrainConfig(dataset="synthetic", synthetic_samples=50, output_dir=str(tmp_path)))
    before = split.x_train
    assert place_data(split, torch.device("cpu"), print).x_train is before


def test_text_windows_predict_the_next_byte():
    tokens = text.tokenize("abcdefghij")
    x, y = text.windows(tokens, 4)
    assert x.shape == (2, 4) and y.shape == (2, 4)
    assert bytes(x[0].astype(np.uint8)) == b"abcd" and bytes(y[0].astype(np.uint8)) == b"bcde"
    assert bytes(x[1].astype(np.uint8)) == b"fghi" and bytes(y[1].astype(np.uint8)) == b"ghij"


def test_stdlib_docstrings_walks_sorted_and_skips_tests(tmp_path):
    long = "x" * 50
    (tmp_path / "b.py").write_text(f'"""B module {long}"""\ndef f():\n    """F function {long}"""\n')
    (tmp_path / "a.py").write_text(f'"""A module {long}"""\nclass C:\n    """short"""\n')
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "t.py").write_text(f'"""T {long}"""\n')
    (tmp_path / "broken.py").write_text("def (:\n")
    corpus = text.stdlib_docstrings(str(tmp_path))
    assert corpus == f"A module {long}\n\nB module {long}\n\nF function {long}".encode()
    assert text.stdlib_docstrings(str(tmp_path), max_bytes=10) == b"A module x"


def test_the_real_corpus_is_prose():
    corpus = text.stdlib_docstrings(max_bytes=200_000)
    assert len(corpus) == 200_000
    words = corpus.decode("utf-8", "replace").split()
    assert sum(w.lower() in ("the", "a", "of", "to", "is") for w in words) / len(words) > 0.05


def test_transformer_sizes_and_shapes():
    assert set(TRANSFORMER_SIZES) == set(MODEL_SIZES)
    spec = model_spec("transformer", 16, text.VOCAB, [1], size="tiny")
    model = build_model(spec)
    logits = model(torch.randint(0, text.VOCAB, (3, 16)))
    assert logits.shape == (3, 16, text.VOCAB)
    assert model.head.weight is model.tokens.weight
    base = build_model(model_spec("transformer", 128, text.VOCAB, [1], size="base"))
    params = sum(p.numel() for p in base.parameters())
    assert 80e6 < params < 90e6  # BERT-base's shape: 12 x 768, with a 256-token vocabulary
    assert transformer_flops_per_sample(model_spec("transformer", 128, text.VOCAB, [1], size="base")) > 6 * 128 * 80e6


def test_causal_attention_does_not_see_the_future():
    torch.manual_seed(0)
    model = build_model(model_spec("transformer", 8, text.VOCAB, [1], size="tiny")).eval()
    a = torch.randint(0, text.VOCAB, (1, 8))
    b = a.clone()
    b[0, 5:] = (b[0, 5:] + 1) % text.VOCAB
    with torch.no_grad():
        assert torch.allclose(model(a)[0, :5], model(b)[0, :5], atol=1e-5)


def test_language_model_loss_and_accuracy_count_every_token(tmp_path):
    cfg = TrainConfig(model="transformer", dataset="synthetic", synthetic_samples=40, seq_len=8, output_dir=str(tmp_path))
    split = load_split(cfg)
    assert split.x_train.dtype == torch.int64 and split.num_classes == text.VOCAB and split.num_features == 8
    model = build_model(model_spec("transformer", 8, text.VOCAB, [1], size="tiny"))

    loss, acc = evaluate(model, split, DistContext(), 4, torch.nn.CrossEntropyLoss())
    assert abs(loss - math.log(text.VOCAB)) < 0.5  # untrained: about uniform over the bytes
    assert 0.0 <= acc < 0.05
    xb, yb, n = next(batches(split.x_test, split.y_test, [0, 1], 2, torch.device("cpu")))
    assert n == 2 and flat_loss(torch.nn.CrossEntropyLoss(), model(xb), yb).shape == ()


def test_transformer_learns_the_corpus_under_torchrun(tmp_path):
    """Two real processes (gloo, DDP) train the tiny transformer on 96 KB of the corpus for 2 epochs,
    read as the text shards the dataset step stages (python -m trainer.datasets export corpus; the
    shards are the corpus byte for byte, test_datasets.py)."""
    export_corpus(str(tmp_path / "corpus"), parts=4, max_bytes=98304)
    proc = torchrun(["--model", "transformer", "--dataset", f"dir:{tmp_path / 'corpus'}", "--corpus-bytes", "98304", "--seq-len", "64",
                     "--batch-size", "16", "--lr", "0.003", "--epochs", "2", "--output-dir", str(tmp_path / "out")], nproc=2)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    epochs = [parse_epoch_line(line) for line in proc.stdout.splitlines() if line.startswith("trainfleet-epoch:")]
    assert [e["epoch"] for e in epochs] == [1, 2]
    assert epochs[1]["loss"] < epochs[0]["loss"] < math.log(text.VOCAB)
    result = next(parse_result_line(line) for line in proc.stdout.splitlines() if line.startswith("trainfleet-result:"))
    assert result["world_size"] == 2
    assert 1.0 < result["final_perplexity"] < 40.0  # uniform bytes would be 256
    print(f"\ntransformer (2 processes, 2 epochs, 96 KB of shards): accuracy {result['final_accuracy']:.4f}, "
          f"perplexity {result['final_perplexity']:.2f}")
    assert result["final_accuracy"] > 0.12  # next-byte accuracy (0.156 measured); chance is 1/256
    assert "precision=fp32" in proc.stdout


def test_gpu_benchmark_runs_briefly_on_the_cpu(tmp_path):
    """benchmarks/trainer_gpu.py's CPU mode: both sides run and every figure is there (none is judged)."""
    proc = run_cmd([sys.executable, str(REPO_ROOT / "benchmarks" / "trainer_gpu.py"), "--device", "cpu", "--quick",
                    "--json", str(tmp_path / "rows.json")], env=base_env())
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "measured matrix-product peak" in proc.stdout and "trainer MFU" in proc.stdout
    report = json.loads((tmp_path / "rows.json").read_text())
    assert [(r["work"], r["precision"]) for r in report["rows"]] == [("mlp-small", "fp32"), ("transformer-tiny", "bf16")]
    for row in report["rows"]:
        assert row["trainer_samples_per_s"] > 0 and row["bare_samples_per_s"] > 0 and row["flops_per_sample"] > 0
        assert row["ratio"] == pytest.approx(row["trainer_samples_per_s"] / row["bare_samples_per_s"])


if __name__ == "__main__":
    sys.exit(pytest.main([__file__]))
