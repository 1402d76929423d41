"""Every checkpoint of a run carries a model card (README.md) whose code loads it and gives the logits the run's own
evaluation used; the CLI answers bad checkpoint folders with a message, and rewrites older ones."""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch

from bertcore.modeling import hf_format
from bertcore import runs as R
from bertcore.modeling.heads import BertForPreTraining
from bertcore.training.cli import main
from bertcore.runs.config import TrainConfig, fields_for
from bertcore.training.evaluate import evaluate_checkpoint
from bertcore.training.tasks import make_task

from .conftest import FIXTURES, TINY_CORPUS, TINY_RUN
from .test_hf_format import write_legacy

TINY = json.dumps(TINY_RUN)
PROBE = "The council [MASK] on Monday."


def pretrain(run, *extra) -> None:
    argv = ["pretrain", "--run-dir", str(run), "--corpus", str(TINY_CORPUS), "--model-overrides", TINY,
            "--max-seq-len", "32", "--batch-size", "8", "--max-steps", "6", "--log-every", "3", "--eval-every", "3",
            "--eval-batches", "2", "--save-every", "4", "--dropout", "0", "--lock", "none", "--device", "cpu",
            "--val-fraction", "0.2", "--lr", "1e-2", "--warmup", "2", "--probe", PROBE, "--threads", "1", *extra]
    assert main(argv) == 0


@pytest.fixture(scope="module")
def pretrain_runs(tmp_path_factory):
    """kind -> a finished 6-step run (checkpoints at steps 4 and 6; evaluations at 0, 3, 6)."""
    root = tmp_path_factory.mktemp("card_runs")
    out = {"post": root / "post", "pre": root / "pre"}
    pretrain(out["post"])
    pretrain(out["pre"], "--pre-layer-norm")
    return out


def card_code(ckpt) -> str:
    card = (ckpt / "README.md").read_text(encoding="utf-8")
    (code,) = re.findall(r"```python\n(.*?)```", card, re.S)
    return code


def run_card_code(ckpt) -> dict:
    """Execute the card's code as a user would paste it; returns its variables."""
    scope: dict = {}
    exec(compile(card_code(ckpt), str(ckpt / "README.md"), "exec"), scope)  # noqa: S102 - our own card
    return scope


def evaluation_model(ckpt):
    """The model the run's evaluation of this checkpoint uses (:func:`evaluate_checkpoint`)."""
    config = R.read_config(ckpt.parent.parent)
    task = make_task(TrainConfig.from_dict(config["args"], task=config["task"]))
    return task.model_class.from_pretrained(ckpt)


@pytest.mark.parametrize("kind", ["post", "pre"])
@torch.no_grad()
def test_the_card_code_gives_the_logits_of_the_runs_evaluation(pretrain_runs, kind):
    run = pretrain_runs[kind]
    ckpt = R.last_checkpoint(run)
    scope = run_card_code(ckpt)
    code = card_code(ckpt)
    assert "from transformers import AutoModelForMaskedLM" in code and str(ckpt) in code
    assert "bertcore" not in code.split("# MLM + NSP")[0]  # transformers loads it, exactly
    inputs = scope["inputs"]
    ours = evaluation_model(ckpt)(**inputs).prediction_logits
    scale = ours.abs().max()
    torch.testing.assert_close(scope["logits"], ours, atol=1e-5 * max(1.0, float(scale)), rtol=0)
    probe = R.read_probe(run)[-1]  # what the run logged at this step
    assert probe["step"] == R.checkpoint_step(ckpt) == 6 and probe["text"] == PROBE
    masked = inputs["input_ids"][0] == scope["tokenizer"].mask_token_id
    top = scope["logits"][0, masked].float().softmax(-1).topk(5)
    for (tokens, probs), logged in zip(zip(top.indices, top.values), probe["predictions"]):
        assert scope["tokenizer"].convert_ids_to_tokens(int(tokens[0])) == logged[0][0]
        assert [round(float(p), 4) for p in probs] == pytest.approx([p for _, p in logged], abs=2e-4)


@pytest.mark.parametrize("kind", ["post", "pre"])
def test_the_card_has_the_recipe_every_option_the_data_and_the_held_out_metrics(pretrain_runs, kind):
    run = pretrain_runs[kind]
    config = R.read_config(run)
    for ckpt in R.checkpoints(run):
        card = (ckpt / "README.md").read_text(encoding="utf-8")
        step = R.checkpoint_step(ckpt)
        assert card.startswith(f"# {run.name} @ step {step}")
        assert "- Recipe: custom options" in card
        for f in fields_for("pretrain"):
            assert f"| {f.name} | " in card, f.name
        assert "| max_steps | 6 |" in card and "| pre_layer_norm | " + ("True" if kind == "pre" else "False") in card
        assert str(TINY_CORPUS) in card and "held-out split: 0.2" in card
        assert f"{config['data']['val_documents']} held-out (val) documents" in card
        val = [r for r in R.read_metrics(run, "val") if r["step"] <= step][-1]
        assert f"## Held-out metrics at step {step}" in card
        if val["step"] != step:
            assert f"the last one before it, at step {val['step']}" in card
        assert f"| mlm_loss | {val['mlm_loss']:.6g} |" in card and f"| nsp_acc | {val['nsp_acc']:.6g} |" in card
        fmt = "roberta-prelayernorm" if kind == "pre" else "bert"
        assert f"(format: {fmt})" in card
        if kind == "pre":
            assert "nsp_head.safetensors" in card and "RobertaPreLayerNorm" in card
    assert (R.checkpoints(run)[-1] / "README.md").is_file() and len(R.checkpoints(run)) == 2


def test_a_finetuning_card_loads_the_classifier(tmp_path):
    run = tmp_path / "ft"
    argv = ["finetune", "--run-dir", str(run), "--init", "scratch", "--model-overrides", TINY, "--dataset",
            str(FIXTURES / "tiny_labels.csv"), "--max-seq-len", "16", "--batch-size", "8", "--max-steps", "4",
            "--eval-every", "4", "--lock", "none", "--device", "cpu", "--no-baseline", "--threads", "1",
            "--pre-layer-norm"]
    assert main(argv) == 0
    ckpt = R.last_checkpoint(run)
    assert hf_format.folder_format(ckpt) == hf_format.PRELN
    scope = run_card_code(ckpt)
    assert "AutoModelForSequenceClassification" in card_code(ckpt)
    with torch.no_grad():
        ours = evaluation_model(ckpt)(**scope["inputs"]).logits
    torch.testing.assert_close(scope["logits"], ours, atol=1e-5, rtol=0)
    assert "held-out (val)" in (ckpt / "README.md").read_text() and "| dataset | " in (ckpt / "README.md").read_text()


# ----------------------------------------------------------------------------- the CLI
def test_export_rewrites_an_older_pre_ln_checkpoint_and_its_card(pretrain_runs, tmp_path, capsys):
    run = shutil.copytree(pretrain_runs["pre"], tmp_path / "old")
    ckpt = R.last_checkpoint(run)
    model = BertForPreTraining.from_pretrained(ckpt)
    write_legacy(ckpt, model)
    (ckpt / "README.md").unlink()
    before = evaluate_checkpoint(ckpt)
    assert main(["evaluate", "--checkpoint", str(ckpt)]) == 0
    assert "transformers loads it WITHOUT an error but computes a different model" in capsys.readouterr().err
    assert main(["export", "--checkpoint", str(ckpt)]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "roberta-prelayernorm"
    assert hf_format.folder_format(ckpt) == hf_format.PRELN and (ckpt / "README.md").is_file()
    after = evaluate_checkpoint(ckpt)
    assert after == before  # the same model
    assert main(["export", "--checkpoint", str(tmp_path)]) == 2


@pytest.fixture
def broken_runs(pretrain_runs, tmp_path):
    """name -> a copy of the pre-LN run whose last checkpoint is broken one way."""
    out = {}
    for name in ("truncated", "model_type", "no_tokenizer"):
        run = shutil.copytree(pretrain_runs["pre"], tmp_path / name)
        out[name] = R.last_checkpoint(run)
    weights = out["truncated"] / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    data = json.loads((out["model_type"] / "config.json").read_text())
    (out["model_type"] / "config.json").write_text(json.dumps({**data, "model_type": "gpt2"}))
    for f in ("vocab.txt", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        (out["no_tokenizer"] / f).unlink(missing_ok=True)
    return out


@pytest.mark.parametrize("name,expected", [("truncated", "is truncated or corrupt"),
                                           ("model_type", "this is a 'gpt2' config"),
                                           ("no_tokenizer", "cannot load the tokenizer")])
def test_cli_evaluate_answers_a_bad_checkpoint_with_a_message(broken_runs, capsys, name, expected):
    assert main(["evaluate", "--checkpoint", str(broken_runs[name])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and "Traceback" not in err
