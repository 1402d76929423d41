"""The same command under torchrun: 2 processes, gloo backend (PyTorch DDP), on the CPU; on CUDA with
``BERTCORE_DDP_DEVICE=cuda`` (two ranks on one GPU share it through gloo: docs/gpu.md)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertcore import runs as R
from bertcore.loading import sources
from bertcore.training.cli import parse_args
from bertcore.training.loop import Trainer

from .conftest import FIXTURES, ROOT, TINY_CORPUS, TINY_RUN

TINY = json.dumps(TINY_RUN)
DEVICE = os.environ.get("BERTCORE_DDP_DEVICE", "cpu")
WORDPIECE = ["--tokenizer", str(ROOT / "models" / "minilm-mlm")]  # the packaged vocabulary, in the work tree
pytestmark = pytest.mark.skipif(DEVICE != "cpu" and not torch.cuda.is_available(), reason="no CUDA here")


def torchrun(argv, tmp_path, timeout=240):
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "BERT_EXPLORER_CACHE": str(tmp_path / "cache"), "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
           "bertcore.training.cli", *argv]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_ddp_finetune_equals_single_process_and_pretrain_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))
    ft = ["finetune", "--init", "scratch", *WORDPIECE, "--model-overrides", TINY,
          "--dataset", str(FIXTURES / "tiny_labels.csv"),
          "--max-seq-len", "16", "--batch-size", "16", "--max-steps", "4", "--log-every", "1", "--eval-every", "4",
          "--save-every", "100", "--lock", "none", "--device", DEVICE, "--precision", "fp32", "--dropout", "0", "--lr",
          "1e-3", "--no-baseline"]
    torchrun(ft + ["--run-dir", str(tmp_path / "ddp")], tmp_path)
    single = ft + ["--run-dir", str(tmp_path / "single")]
    ns = parse_args(single)
    trainer = Trainer(ns, Path(ns.run_dir), single, install_signals=False)
    assert trainer.run() == "done"

    config = R.read_config(tmp_path / "ddp")
    assert config["world_size"] == 2 and R.read_status(tmp_path / "ddp")["state"] == "done"
    # two ranks of 8 examples with averaged gradients == one process with the batch of 16
    a = sources.load(sources.ModelSource("run", str(R.last_checkpoint(tmp_path / "ddp")))).model.state_dict()
    b = trainer.model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-4, atol=1e-5, msg=k)
    ddp_loss = [r["loss"] for r in R.read_metrics(tmp_path / "ddp", "train")]
    one_loss = [r["loss"] for r in R.read_metrics(tmp_path / "single", "train")]
    assert ddp_loss == [round(x, 6) for x in ddp_loss] and len(ddp_loss) == 4
    for x, y in zip(ddp_loss, one_loss):
        assert abs(x - y) < 1e-4

    # a time budget: both ranks calibrate together (the same number of timed steps, rank 0's step count)
    pre = ["pretrain", "--run-dir", str(tmp_path / "pre"), "--corpus", str(TINY_CORPUS), *WORDPIECE,
           "--model-overrides", TINY, "--max-seq-len", "32", "--batch-size", "8", "--max-time", "0.02",
           "--log-every", "2", "--eval-every", "4", "--eval-batches", "1", "--save-every", "1000", "--lock", "wait",
           "--device", DEVICE, "--val-fraction", "0.2"]
    torchrun(pre, tmp_path)
    status, cal = R.read_status(tmp_path / "pre"), R.read_config(tmp_path / "pre")["calibration"]
    assert status["state"] == "done" and status["total_steps"] == cal["total_steps"] >= 1
    assert status["step"] == cal["total_steps"] or status["step"] == status["stopped_early_at"]
    # every second step, and the last step always, whatever this machine's speed made the calibrated count
    last = status["step"]
    expected = sorted(set(range(2, last + 1, 2)) | {last})
    assert [r["step"] for r in R.read_metrics(tmp_path / "pre", "train")] == expected
    assert R.lock_holder(tmp_path, DEVICE) is None
    assert sources.load(sources.ModelSource("run", str(R.last_checkpoint(tmp_path / "pre")))).head == "pretraining"


def test_ranks_that_share_a_gpu_use_gloo(monkeypatch):
    """NCCL refuses two ranks on one device: a node with more ranks than GPUs gets gloo, and rank r the GPU r mod
    count (measured on an H200: docs/gpu.md)."""
    from bertcore.training import dist

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert dist.process_group_backend(True, 1) == "nccl"
    assert dist.process_group_backend(True, 2) == "gloo"
    assert dist.process_group_backend(False, 1) == "gloo"
    assert dist.pick_device("cuda", dist.Dist(1, 2, 1, True)) == torch.device("cuda", 0)
