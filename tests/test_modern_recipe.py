"""The 'modern' recipe: ``--architecture modernbert`` trains a ModernBERT-style model from a
preset at the classic model's parameter count, and its checkpoints are transformers' ModernBertForMaskedLM at
float64 parity (exact), refused by transformers' Bert classes, opened by bertcore's loader and resumed by the loop.
"""

from __future__ import annotations

import json

import pytest
import torch

from bertcore import runs as R
from bertcore.loading import sources
from bertcore.modeling.config import preset
from bertcore.modeling.heads import BertForMaskedLM, BertForPreTraining
from bertcore.loading.hf_export import usage_code
from bertcore.training.cli import parse_args, resume_config, to_config
from bertcore.training import card
from bertcore.runs.config import TrainConfig
from bertcore.training.loop import Trainer
from bertcore.training.models import TrainingError, _count, build_model, modern_config, validate
from bertcore.training.recipes import RECIPES, recipe_of

from .conftest import TINY_CORPUS, TINY_RUN, assert_parity

MODERN = ["--architecture", "modernbert", "--no-nsp", "--unigram-init"]


def _argv(run_dir, steps: int, *extra: str) -> list[str]:
    return ["pretrain", "--run-dir", str(run_dir), "--corpus", str(TINY_CORPUS), "--model-overrides",
            json.dumps({**TINY_RUN, "num_hidden_layers": 3}), "--max-seq-len", "32", "--batch-size", "8",
            "--max-steps", str(steps), "--log-every", "1", "--eval-every", "3", "--eval-batches", "1",
            "--save-every", "3", "--dropout", "0", "--lock", "none", "--device", "cpu", "--val-fraction", "0.2",
            "--lr", "3e-3", "--warmup", "2", *MODERN, *extra]


def _run(argv):
    ns = parse_args(argv)
    cfg = resume_config(ns) if ns.task == "resume" else to_config(ns)
    return Trainer(cfg, cfg.run_dir, argv, install_signals=False).run()


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def test_modern_config_is_modernbert_at_the_classic_parameter_count():
    base = preset("tiny", vocab_size=8000, pre_layer_norm=True)  # the 'scratch-fast' model (its vocabulary)
    modern = modern_config(base, window=16)
    classic, ours = _count(BertForPreTraining, base), _count(BertForMaskedLM, modern)
    assert abs(ours / classic - 1) < 0.01, (ours, classic)
    assert (modern.family, modern.num_hidden_layers, modern.hidden_size, modern.intermediate_size) == (
        "modernbert", 4, 128, 144)
    assert [modern.is_global_layer(i) for i in range(4)] == [True, False, False, True]
    assert modern.position_embedding_type == "rotary" and modern.gated_ffn and modern.local_attention == 16
    assert not (modern.attention_bias or modern.mlp_bias or modern.norm_bias or modern.head_bias)
    assert modern_config(preset("mini", vocab_size=8000), 64).num_hidden_layers == 8


def test_modern_options_that_cannot_work_are_refused_with_a_sentence():
    opts = {**RECIPES["modern"].options, "max_time": 10.0}
    assert validate("pretrain", opts) == []
    assert any("NSP" in p for p in validate("pretrain", {**opts, "nsp": True}))
    assert any("rotary" in p for p in validate("pretrain", {**opts, "position_init": "sinusoidal"}))
    assert any("starting model" in p for p in validate("pretrain", {**opts, "init": "packaged"}))
    with pytest.raises(TrainingError, match="--no-nsp"):
        build_model(TrainConfig.create("pretrain", architecture="modernbert", corpus=str(TINY_CORPUS)))


def test_recipe_of_tells_the_modern_recipe_from_the_classic_one():
    modern, classic = RECIPES["modern"].options, RECIPES["scratch-fast"].options
    assert set(classic.items()) < set(modern.items())  # the same run but for the architecture
    assert recipe_of(TrainConfig.create("pretrain", **modern).to_dict()) == "modern"
    assert recipe_of(TrainConfig.create("pretrain", **classic).to_dict()) == "scratch-fast"
    assert card.recipe_of("pretrain", dict(modern)) == "modern"


def test_modern_run_checkpoint_is_modernbert_for_transformers_and_bertcore(tmp_path):
    from transformers import AutoTokenizer, BertForMaskedLM as HFBert, ModernBertForMaskedLM

    run = tmp_path / "runs" / "modern"
    assert _run(_argv(run, 3)) == "done"
    assert _run(["resume", "--run-dir", str(run), "--max-steps", "6"]) == "done"  # resumed with the MLM-only class
    assert [r["step"] for r in R.read_metrics(run, "train")] == list(range(1, 7))
    assert "nsp_loss" not in R.read_metrics(run, "train")[0]
    ckpt = R.last_checkpoint(run)
    data = json.loads((ckpt / "config.json").read_text())
    assert data["model_type"] == "modernbert" and data["architectures"] == ["ModernBertForMaskedLM"]
    assert data["layer_types"] == ["full_attention", "sliding_attention", "sliding_attention"]

    loaded = sources.load(sources.ModelSource("run", str(ckpt)))  # what the sidebar's "Use this checkpoint" does
    assert loaded.head == "mlm" and loaded.config.family == "modernbert" and "[MASK]" in loaded.tokenizer.vocab
    hf = ModernBertForMaskedLM.from_pretrained(ckpt, attn_implementation="eager").eval()
    tok = AutoTokenizer.from_pretrained(ckpt)
    # longer than the 16-token window, so the local layers see part of the sentence; at most 8 [PAD]s (half the
    # window): a [PAD] query with only [PAD] keys in reach is NaN in transformers' eager path, and the NaN spreads
    enc = tok(["the government said it would [MASK] the new law next week, after a long debate in the house",
               "a [MASK] day in the house, and the roads were closed for the night"], return_tensors="pt", padding=True)
    ids, mask = enc["input_ids"], enc["attention_mask"]
    assert ids.shape[1] > 16 and 0 < int((mask == 0).sum()) <= 8
    with torch.no_grad():
        ours = loaded.model.double()(ids, mask, output_hidden_states=True)
        theirs = hf.double()(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    real = mask.bool()
    assert_parity(ours.logits[real], theirs.logits[real])
    assert len(ours.hidden_states) == len(theirs.hidden_states) == 4
    for mine, hf_state in zip(ours.hidden_states, theirs.hidden_states):
        assert_parity(mine[real], hf_state[real])
    with pytest.raises(Exception, match="NOT A BERT CHECKPOINT"):
        HFBert.from_pretrained(ckpt)  # exact or refused
    assert "ModernBertForMaskedLM" in (ckpt / "README.md").read_text()
    assert "AutoModelForMaskedLM" in usage_code(ckpt)
