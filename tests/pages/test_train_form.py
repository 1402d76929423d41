"""AppTest of the Train page's launch form (explorer/train/form.py): the one-click recipes launch exactly
their options, every input shows TrainConfig's default, range and help, the knobs reach run.json, the
corpus vocabulary and the named corpora are offered."""

from __future__ import annotations

import json

import pytest

from bertcore import runs
from bertcore.runs.config import TrainConfig, default_lr, field_info
from bertcore.training.recipes import DEFAULT_RECIPE, RECIPES

from .conftest import page


@pytest.mark.parametrize("name,minutes", [(DEFAULT_RECIPE, None), ("minilm-mlm", 3.0), ("phase-change", None),
                                          ("modern", None)])
def test_page_launches_the_recipe(runs_root, monkeypatch, name, minutes):
    launched = []

    def fake_launch(task, args, **kwargs):
        launched.append((task, args, kwargs))
        run_dir = runs_root / "fake-run"
        run_dir.mkdir(exist_ok=True)
        return run_dir

    monkeypatch.setattr(runs, "launch", fake_launch)
    at = page("train")
    assert not at.exception
    assert at.radio(key="train_recipe").value == DEFAULT_RECIPE  # what a new user gets
    if name != DEFAULT_RECIPE:
        at.radio(key="train_recipe").set_value(name).run()
    if minutes is not None:
        at.number_input(key=f"train_recipe_minutes_{name}").set_value(minutes).run()
    at.button(key="train_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    assert len(launched) == 1
    task, args, _ = launched[0]
    assert task == "pretrain"
    assert args == {**RECIPES[name].options, "max_time": minutes or RECIPES[name].minutes}


def test_custom_shows_the_whole_form(runs_root):
    at = page("train")
    at.radio(key="train_recipe").set_value("custom").run()
    assert not at.exception
    assert at.selectbox(key="train_pt_start").value == "scratch"


def test_page_inputs_show_the_config_defaults_ranges_and_help(runs_root):
    at = page("train", train_recipe="custom")  # the whole form (a one-click recipe is the default)
    assert not at.exception
    for task in ("pretrain", "finetune"):
        if task == "finetune":
            at.radio(key="train_task").set_value("finetune").run()
        for name, key in (("batch_size", "batch"), ("max_seq_len", "seqlen"), ("log_every", "log"),
                          ("save_every", "save"), ("keep_checkpoints", "keep"), ("seed", "seed"),
                          ("max_steps", "steps")):
            w = at.number_input(key=f"train_{task}_{key}")
            info = field_info(name, task)
            assert w.value == info["default"], (task, name)
            assert (w.min, w.max) == (info["min"], info["max"]) and info["help"][1:20] in w.help
        lr = at.number_input(key=f"train_{task}_lr_{'scratch' if task == 'pretrain' else 'init'}")
        assert lr.value == pytest.approx(default_lr(task, task == "pretrain"))
    head = at.number_input(key="train_finetune_head_lr")  # fine-tuning only
    assert head.value == pytest.approx(field_info("head_lr", "finetune")["default"]) == 1e-3


@pytest.mark.parametrize("choice", ["auto", "cls", "mean"])
def test_the_fine_tuning_form_offers_the_classifier_pooling(runs_root, monkeypatch, choice):
    """"Classifier reads": 'auto' by default, so the packaged MiniLM gets the mean-pooled head it was
    trained for; each choice reaches the launched options as --pooling."""
    launched = []

    def fake_launch(task, args, **kwargs):
        launched.append((task, args))
        (runs_root / "fake-run").mkdir(exist_ok=True)
        return runs_root / "fake-run"

    monkeypatch.setattr(runs, "launch", fake_launch)
    at = page("train", train_recipe="custom")
    at.radio(key="train_task").set_value("finetune").run()
    box = at.selectbox(key="train_ft_pooling")
    assert box.value == field_info("pooling", "finetune")["default"] == "auto" and "1_Pooling" in box.help
    box.set_value(choice).run()
    at.button(key="train_start").click().run()
    assert not at.exception, [e.value for e in at.exception]
    [(task, args)] = launched
    assert task == "finetune" and args["pooling"] == choice


def test_page_recipe_options_reach_run_json(runs_root):
    """Length in minutes and the recipe knobs set on the page arrive in run.json's args (a TrainConfig)."""
    at = page("train", train_recipe="custom")
    at.radio(key="train_pretrain_length").set_value("minutes").run()
    at.number_input(key="train_pretrain_minutes").set_value(2.5).run()
    at.toggle(key="train_nsp").set_value(False).run()
    at.slider(key="train_split").set_value((1.0, 1.0)).run()
    at.checkbox(key="train_save_early").check().run()
    at.button(key="train_start").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    [run] = [p for p in runs_root.iterdir() if not p.name.startswith(".")]
    try:
        args = runs.read_config(run)["args"]
        cfg = TrainConfig.from_dict(args)
        assert (cfg.max_time, cfg.max_steps, cfg.nsp, cfg.mask_replace_prob, cfg.random_replace_prob, cfg.save_early) \
            == (2.5, None, False, 1.0, 0.0, True)
        assert cfg == TrainConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    finally:
        runs.cancel(run, timeout_s=30)


def test_page_offers_the_corpus_vocabulary_and_corpora(runs_root, monkeypatch):
    """From-scratch pretraining: 'WordPiece trained on the corpus' and its size reach the launch as
    tokenizer='corpus' and vocab_size; the named corpora are offered."""
    launched = []

    def fake_launch(task, args, **kwargs):
        launched.append((task, args))
        raise runs.RunError("not launched in this test")

    monkeypatch.setattr(runs, "launch", fake_launch)
    at = page("train", train_recipe="custom")
    assert not at.exception, at.exception
    options = " | ".join(at.selectbox(key="train_pt_data").options)  # their labels
    assert all(w in options for w in ("State of the Union", "Wikipedia", "BBC News + State of the Union"))
    at.selectbox(key="train_pt_data").set_value("sotu").run()
    at.selectbox(key="train_pretrain_vocab").set_value("corpus").run()
    at.number_input(key="train_pretrain_vocab_size").set_value(4000).run()
    at.button(key="train_start").click().run()
    assert not at.exception, at.exception
    [(task, args)] = launched
    assert task == "pretrain" and args["corpus"] == "sotu"
    assert args["tokenizer"] == "corpus" and args["vocab_size"] == 4000
    at.selectbox(key="train_pretrain_vocab").set_value("packaged").run()
    at.button(key="train_start").click().run()
    assert launched[-1][1]["tokenizer"] == "packaged" and "vocab_size" not in launched[-1][1]


def test_page_offers_agreement_supervision_and_corpus_weights(runs_root, monkeypatch):
    """The agreement options and the corpus weights show TrainConfig's default, range and help, reach the launch,
    and a margin weight without pairs or a weight for a part the corpus lacks is refused with a message."""
    launched = []
    monkeypatch.setattr(runs, "launch", lambda task, args, **kw: launched.append(args) or runs_root / "fake")
    at = page("train", train_recipe="custom")
    assert not at.exception, at.exception
    for name in ("agreement_pairs", "agreement_attractor_repeat", "agreement_margin_weight", "agreement_margin"):
        w, info = at.number_input(key=f"train_pretrain_{name}"), field_info(name)
        assert w.value == info["default"] and (w.min, w.max) == (info["min"], info["max"])
        assert info["help"][1:40] in w.help
    assert field_info("corpus_weights")["help"][1:40] in at.text_input(key="train_corpus_weights").help
    at.number_input(key="train_pretrain_agreement_margin_weight").set_value(1.0).run()
    at.button(key="train_start").click().run()
    def errors():
        return " ".join(e.value.replace("\\", "") for e in at.error)  # markdown-escaped messages

    assert not launched and "needs --agreement-pairs" in errors()
    at.number_input(key="train_pretrain_agreement_pairs").set_value(5000).run()
    at.text_input(key="train_corpus_weights").set_value("wiki=2").run()
    at.button(key="train_start").click().run()
    assert not launched and "wiki, not a part of the corpus 'bbc'" in errors()
    at.text_input(key="train_corpus_weights").set_value("bbc=2").run()
    at.number_input(key="train_pretrain_agreement_attractor_repeat").set_value(3).run()
    assert field_info("nsp_balance")["help"][1:40] in at.checkbox(key="train_nsp_balance").help
    at.checkbox(key="train_nsp_balance").check().run()
    at.button(key="train_start").click().run()
    assert not at.exception and len(launched) == 1, [e.value for e in at.error]
    args = launched[0]
    assert (args["agreement_pairs"], args["agreement_margin_weight"], args["corpus_weights"]) == (5000, 1.0, "bbc=2")
    assert args["agreement_attractor_repeat"] == 3 and args["nsp_balance"] is True
