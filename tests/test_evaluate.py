"""What a run logs while it trains equals what its checkpoint gives, loaded fresh.

The bug these tests name: a cache of the stacked Q/K/V weights, keyed on ``Parameter._version``, went
stale under fused AdamW (which updates in place without bumping ``_version``), so every no-grad forward
of a training process (each evaluation, the probe, fine-tuning's test results) mixed step-0 attention
weights with current ones. Checked by hand: restoring that cache in ``BertSelfAttention`` makes each
test here fail.
"""

import json
import random
import subprocess
import sys

import pytest
import torch

from bertcore import runs as R
from bertcore.modeling.config import preset
from bertcore.modeling.heads import BertForPreTraining
from bertcore.training.cli import main
from bertcore.training.evaluate import evaluate_checkpoint
from bertcore.training.optim import make_optimizer

from .conftest import FIXTURES, ROOT, TINY_CORPUS, TINY_RUN

TINY = json.dumps(TINY_RUN)
PROBE = "alice likes to eat [MASK] every day ."


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def _fresh_copy(model: torch.nn.Module) -> torch.nn.Module:
    fresh = type(model)(model.config)
    fresh.load_state_dict(model.state_dict())
    return fresh.eval()


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "foreach"])
def test_no_grad_forward_after_optimizer_steps_equals_a_fresh_model(fused):
    """A no-grad forward before training (what the step-0 evaluation does), N steps of the loop's own AdamW,
    then a no-grad forward: it must equal the same weights in a fresh model."""
    torch.manual_seed(0)
    cfg = preset("tiny", vocab_size=120, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(cfg)
    opt = make_optimizer(model, 1e-2, 0.01)
    if not fused:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    assert bool(opt.defaults.get("fused")) == fused  # the loop's optimizer is the fused one on this torch
    ids = torch.randint(5, 120, (2, 12))
    with torch.no_grad():
        model.eval()
        before = model(ids).prediction_logits
    model.train()
    for _ in range(3):
        labels = ids.clone()
        out = model(ids, labels=labels)
        opt.zero_grad()
        out.mlm_loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        after = model(ids)
        fresh = _fresh_copy(model)(ids)
    assert (after.prediction_logits - before).abs().max() > 1e-3  # the steps changed the model
    assert (after.prediction_logits - fresh.prediction_logits).abs().max() <= 1e-6
    for a, b in zip(model(ids, output_attentions=True).attentions, fresh_attn := _fresh_copy(model)(
            ids, output_attentions=True).attentions):
        assert (a - b).abs().max() <= 1e-6
    assert len(fresh_attn) == cfg.num_hidden_layers


def _evaluate_cli(checkpoint, *extra) -> dict:
    """``python -m bertcore.training evaluate`` in a new process (the checkpoint loaded fresh)."""
    out = subprocess.run([sys.executable, "-m", "bertcore.training", "evaluate", "--checkpoint", str(checkpoint),
                          "--threads", "1", *extra], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _assert_metrics_equal(logged: dict, recomputed: dict, keys) -> None:
    for k in keys:
        assert recomputed[k] == pytest.approx(logged[k], abs=1e-6), k


def _assert_probe_equal(logged: dict, recomputed: dict) -> None:
    assert recomputed["text"] == logged["text"]
    for mine, theirs in zip(logged["predictions"], recomputed["predictions"]):
        assert mine[0][0] == theirs[0][0]  # top-1 token
        for (tok_a, p_a), (tok_b, p_b) in zip(mine, theirs):
            assert p_a == pytest.approx(p_b, abs=1e-4)


def test_pretraining_run_logs_what_its_checkpoint_gives(tmp_path):
    run = tmp_path / "pre"
    argv = ["pretrain", "--run-dir", str(run), "--corpus", str(TINY_CORPUS), "--model-overrides", TINY,
            "--max-seq-len", "32", "--batch-size", "8", "--max-steps", "12", "--log-every", "4", "--eval-every", "6",
            "--eval-batches", "2", "--dropout", "0", "--lock", "none", "--device", "cpu", "--val-fraction", "0.2",
            "--lr", "1e-2", "--warmup", "2", "--probe", "The council [MASK] on Monday.", "--threads", "1"]
    assert main(argv) == 0
    val = R.read_metrics(run, "val")
    assert [r["step"] for r in val] == [0, 6, 12]
    assert val[-1]["mlm_loss"] != pytest.approx(val[0]["mlm_loss"], abs=1e-3)  # it trained
    ckpt = R.last_checkpoint(run)
    got = _evaluate_cli(ckpt)
    assert got["step"] == 12 and got["split"] == "val"
    _assert_metrics_equal(val[-1], got, ("loss", "mlm_loss", "mlm_acc", "mlm_acc_mask", "mlm_top5_mask", "nsp_acc"))
    _assert_probe_equal(R.read_probe(run)[-1], got["probe"])


def test_finetuning_test_results_are_the_checkpoints(tmp_path):
    run = tmp_path / "ft"
    argv = ["finetune", "--run-dir", str(run), "--init", "scratch", "--model-overrides", TINY, "--dataset",
            str(FIXTURES / "tiny_labels.csv"), "--max-seq-len", "16", "--batch-size", "8", "--max-steps", "12",
            "--log-every", "4", "--eval-every", "6", "--lock", "none", "--device", "cpu", "--lr", "3e-3",
            "--no-baseline", "--threads", "1"]
    assert main(argv) == 0
    results = R.read_results(run)
    got = evaluate_checkpoint(R.last_checkpoint(run), split="test")
    _assert_metrics_equal(results["test"], got, ("loss", "acc", "f1"))
    _assert_metrics_equal(R.read_metrics(run, "val")[-1], evaluate_checkpoint(R.last_checkpoint(run)),
                          ("loss", "acc", "f1"))


def test_evaluate_refuses_a_folder_that_is_not_a_checkpoint(tmp_path, capsys):
    assert main(["evaluate", "--checkpoint", str(tmp_path)]) == 2
    assert "not a run checkpoint" in capsys.readouterr().err


# ----------------------------------------------------------------------------- a corpus that needs context
NAMES = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"]
FOODS = ["apples", "bread", "eggs", "grapes", "rice", "cheese", "fish", "beans", "soup", "cake"]
CITIES = ["london", "paris", "rome", "madrid", "berlin", "vienna", "oslo", "dublin", "lisbon", "prague"]


TEMPLATES = ["{n} likes to eat {f} every day .", "every day {n} likes to eat {f} .", "{n} eats {f} for lunch .",
             "{n} lives in {c} with a friend .", "the friend of {n} lives in {c} too .", "{n} walks to work in {c} ."]


def context_corpus(path, n_docs: int = 600, seed: int = 0):
    """Documents of 3-5 sentences about one person, in random templates and order; each name has one food and
    one city, so only the context (the name) gives the noun at a [MASK]."""
    rng = random.Random(seed)
    docs = []
    for _ in range(n_docs):
        i = rng.randrange(len(NAMES))
        sents = [rng.choice(TEMPLATES).format(n=NAMES[i], f=FOODS[i], c=CITIES[i]) for _ in range(rng.randint(3, 5))]
        docs.append(" ".join(sents))
    path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
    return path


def test_a_run_on_a_corpus_that_needs_context_learns_it_as_logged_and_as_recomputed(tmp_path):
    corpus = context_corpus(tmp_path / "context.txt")
    run = tmp_path / "ctx"
    argv = ["pretrain", "--run-dir", str(run), "--corpus", str(corpus), "--preset", "tiny", "--tokenizer", "corpus",
            "--vocab-size", "200", "--no-nsp", "--max-seq-len", "64", "--batch-size", "32", "--lr", "1e-3",
            "--warmup", "50", "--max-steps", "1000", "--eval-every", "500", "--eval-batches", "4", "--log-every", "100",
            "--dropout", "0", "--mask-replace-prob", "1", "--random-replace-prob", "0", "--lock", "none",
            "--device", "cpu", "--probe", PROBE, "--threads", "2", "--save-every", "100000"]
    assert main(argv) == 0
    val = R.read_metrics(run, "val")[-1]
    assert val["mlm_acc_mask"] >= 0.80, val
    got = evaluate_checkpoint(R.last_checkpoint(run))
    assert got["mlm_acc_mask"] >= 0.80
    _assert_metrics_equal(val, got, ("mlm_loss", "mlm_acc_mask"))
    probe = R.read_probe(run)[-1]
    _assert_probe_equal(probe, got["probe"])
    assert got["probe"]["predictions"][0][0][0] == "apples"
