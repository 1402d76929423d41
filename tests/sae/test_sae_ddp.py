"""SAE and transcoder training under ``torchrun`` (2 processes, gloo, on the CPU): each rank streams its own shard of
the corpus and DDP averages the gradients. The dictionaries equal those of one process reading the same global
batches (``--shards 2``), within float tolerance, and a DDP run resumed from a checkpoint ends where the straight
run did."""

from __future__ import annotations

import dataclasses
import os
import shutil
import subprocess
import sys

import pytest
import torch

from bertcore.sae import io as sae_io
from bertcore.sae import transcoder
from bertcore.sae.train import FINAL_DIR, Trainer, checkpoints
from bertcore.runs import RunDir
from tests.conftest import ROOT

from .test_sae_train import options, tiny_folder  # noqa: F401 - tiny_folder: the fixture


def torchrun(tmp_path, run_dir, cfg, command: str = "train") -> None:
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1", "BERT_EXPLORER_CACHE": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
           "bertcore.sae", command, "--run-dir", str(run_dir), *(cfg.to_argv() if command == "train" else [])]
    proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    if proc.returncode != 0 and "exitcode  : -6" in proc.stderr:
        # a gloo rank aborted (SIGABRT) once in about eight runs on a loaded 2-core machine, its cause not found;
        # the run is started again from scratch (a failure that is the code's repeats, and fails below)
        if command == "train":
            shutil.rmtree(run_dir, ignore_errors=True)
        proc = subprocess.run(cmd, env=env, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def weights(run_dir, kind: str) -> dict[str, torch.Tensor]:
    load = transcoder.load if kind == "transcoder" else sae_io.load
    out = {}
    for folder in sorted((run_dir / FINAL_DIR).glob("layer-*")):
        module, _ = load(folder)
        out.update({f"{folder.name}.{k}": v for k, v in module.state_dict().items()})
    return out


@pytest.mark.parametrize("kind", ["sae", "transcoder"])
def test_two_ranks_train_the_dictionaries_one_process_does_on_the_same_global_batches(tiny_folder, tmp_path,  # noqa: F811
                                                                                      kind):
    # resampled every 4 steps of 2 x 48 tokens: the ranks' gathered rows must pick the same tokens
    cfg = options(tiny_folder, kind=kind, max_steps=12, save_every=6, keep_checkpoints=3, resample_every=384,
                  dead_tokens=96, device="cpu")
    assert Trainer(dataclasses.replace(cfg, shards=2), tmp_path / "one").run() == 0
    torchrun(tmp_path, tmp_path / "two", cfg)
    one, two = weights(tmp_path / "one", kind), weights(tmp_path / "two", kind)
    assert one.keys() == two.keys() and one
    for name in one:
        torch.testing.assert_close(two[name], one[name], rtol=1e-4, atol=1e-5, msg=name)
    state = torch.load(checkpoints(RunDir(tmp_path / "two"))[-1] / "trainer_state.pt", weights_only=True)
    assert len(state["positions"]) == 2 and state["tokens"] == torch.load(
        checkpoints(RunDir(tmp_path / "one"))[-1] / "trainer_state.pt", weights_only=True)["tokens"]

    # resumable: the last checkpoint and the final dictionaries removed, the run goes on from step 6
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "two", resumed)
    shutil.rmtree(resumed / FINAL_DIR)
    shutil.rmtree(checkpoints(RunDir(resumed))[-1])
    assert checkpoints(RunDir(resumed))[-1].name.endswith("6")
    torchrun(tmp_path, resumed, cfg, "resume")
    again = weights(resumed, kind)
    for name in two:
        torch.testing.assert_close(again[name], two[name], rtol=1e-5, atol=1e-6, msg=name)


def test_a_checkpoint_of_two_shards_asks_for_two_to_resume(tiny_folder, tmp_path):  # noqa: F811
    cfg = options(tiny_folder, max_steps=4, save_every=2, shards=2, device="cpu")
    assert Trainer(cfg, tmp_path / "run").run() == 0
    with pytest.raises(ValueError, match="resume it with --shards 2"):
        Trainer(options(tiny_folder, max_steps=6, save_every=2, device="cpu"), tmp_path / "run").run()
