"""bertcore.training: schedule, one step lowers the loss, end-to-end tiny runs, resume == uninterrupted."""

import json

import numpy as np
import pytest
import torch

from bertcore import data as D
from bertcore import runs as R
from bertcore.loading import sources
from bertcore.modeling.config import preset
from bertcore.modeling.heads import BertForPreTraining
from bertcore.training.cli import parse_args, resume_config, to_config
from bertcore.training.loop import Trainer
from bertcore.training.optim import lr_at, make_optimizer, warmup_steps_of

from .conftest import FIXTURES, TINY_CORPUS, TINY_RUN

TINY = json.dumps(TINY_RUN)


def tiny_pretrain_argv(run_dir, *extra):
    return ["pretrain", "--run-dir", str(run_dir), "--corpus", str(TINY_CORPUS), "--model-overrides", TINY,
            "--max-seq-len", "32", "--batch-size", "8", "--max-steps", "6", "--log-every", "1", "--eval-every", "3",
            "--eval-batches", "1", "--save-every", "3", "--dropout", "0", "--lock", "none", "--device", "cpu",
            "--val-fraction", "0.2", "--lr", "3e-3", "--warmup", "2", *extra]


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("BERT_EXPLORER_CACHE", str(tmp_path / "cache"))


def run_trainer(argv, on_event=None):
    ns = parse_args(argv)
    cfg = resume_config(ns) if ns.task == "resume" else to_config(ns)
    trainer = Trainer(cfg, cfg.run_dir, argv, on_event=on_event, install_signals=False)
    return trainer, trainer.run()


def test_lr_schedule_is_warmup_then_linear_decay():
    assert warmup_steps_of(0.1, 100) == 10 and warmup_steps_of(5, 100) == 5
    lrs = [lr_at(s, 1.0, 10, 100) for s in range(100)]
    assert lrs[0] == pytest.approx(0.1) and lrs[9] == pytest.approx(1.0)
    assert all(b <= a for a, b in zip(lrs[9:], lrs[10:]))
    assert lr_at(99, 1.0, 10, 100) == pytest.approx(1 / 90) and lr_at(100, 1.0, 10, 100) == 0.0
    assert lr_at(50, 1.0, 0, 100) == pytest.approx(0.5)


def test_one_step_lowers_the_loss_on_a_fixed_batch(packaged):
    tok = packaged.tokenizer
    config = preset("nano", **json.loads(TINY), vocab_size=len(tok), hidden_dropout_prob=0.0,
                    attention_probs_dropout_prob=0.0)
    model = BertForPreTraining(config)
    d = D.build_pretraining_data(tok, str(TINY_CORPUS), 32, seed=0, val_fraction=0.2)
    batch = D.PretrainCollator(tok)([d.train[i] for i in range(8)], D.batch_generator(0, 0))
    opt = make_optimizer(model, 3e-3, 0.0)

    def loss():
        return model(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"], labels=batch["labels"],
                     next_sentence_label=batch["next_sentence_label"], masked_only=True).loss

    before = loss()
    before.backward()
    opt.step()
    with torch.no_grad():
        after = loss()
    assert after.item() < before.item() - 0.01


def test_the_new_head_gets_its_own_peak_rate():
    """--head-lr: the classifier's groups carry head_lr / lr, the others 1."""
    from bertcore.modeling.heads import BertForSequenceClassification

    model = BertForSequenceClassification(preset("nano", **json.loads(TINY), vocab_size=100, num_labels=2))
    opt = make_optimizer(model, 1e-4, 0.01, head_lr=2e-3)
    head = {id(p) for p in model.classifier.parameters()}
    for g in opt.param_groups:
        in_head = {id(p) in head for p in g["params"]}
        assert len(in_head) == 1 and g["lr_scale"] == pytest.approx(20.0 if in_head == {True} else 1.0)
    assert len(make_optimizer(model, 1e-4, 0.01).param_groups) == 2  # no head rate: BERT's two groups
    # a real run's steps: test_tiny_finetune_run_with_baseline


def test_layer_wise_lr_decay_scales_each_layer_below_the_top():
    """--layer-lr-decay d: layer i of L at d**(L-1-i), the embeddings at d**L, pooler and head unscaled by it
    (Sun et al. 2019 section 5.3.3); d = 1 leaves the groups as before."""
    from bertcore.modeling.heads import BertForSequenceClassification

    config = preset("nano", **json.loads(TINY), vocab_size=100, num_labels=2)
    model = BertForSequenceClassification(config)
    L = config.num_hidden_layers
    assert L >= 2
    opt = make_optimizer(model, 1e-4, 0.01, head_lr=2e-3, layer_decay=0.5)
    scale_of = {id(p): g["lr_scale"] for g in opt.param_groups for p in g["params"]}
    for name, p in model.named_parameters():
        if name.startswith("classifier."):
            want = 20.0
        elif ".layer." in name:
            want = 0.5 ** (L - 1 - int(name.split(".layer.")[1].split(".")[0]))
        elif "embeddings" in name:
            want = 0.5 ** L
        else:
            want = 1.0
        assert scale_of[id(p)] == pytest.approx(want), name
    plain = make_optimizer(model, 1e-4, 0.01, head_lr=2e-3, layer_decay=1.0)
    assert [g["lr_scale"] for g in plain.param_groups] == [1.0, 1.0, 20.0, 20.0]


def test_tiny_pretraining_run_writes_the_contract(tmp_path):
    run = tmp_path / "runs" / "pre"
    events = []
    _, state = run_trainer(tiny_pretrain_argv(run), on_event=[events.append])
    assert state == "done"
    status = R.read_status(run)
    assert status["state"] == "done" and status["step"] == 6 and status["total_steps"] == 6 and status["error"] is None
    config = R.read_config(run)
    assert (config["task"] == "pretrain" and config["model_config"]["hidden_size"] == 32
            and config["args"]["max_steps"] == 6)
    train = R.read_metrics(run, "train")
    assert [r["step"] for r in train] == [1, 2, 3, 4, 5, 6]
    for key in ("time", "lr", "tokens_per_s", "loss", "mlm_loss", "mlm_acc", "nsp_loss", "nsp_acc"):
        assert key in train[0]
    assert [r["step"] for r in R.read_metrics(run, "val")] == [0, 3, 6]
    assert events == R.read_metrics(run)
    probe = R.read_probe(run)
    assert probe and len(probe[-1]["predictions"]) == 2 and len(probe[-1]["predictions"][0]) == 5
    ckpts = R.checkpoints(run)
    assert [c.name for c in ckpts] == ["step-000003", "step-000006"]
    loaded = sources.load(sources.ModelSource("run", str(ckpts[-1])))
    assert loaded.head == "pretraining" and loaded.config.hidden_size == 32
    assert [s.ref for s in sources.list_run_sources(tmp_path / "runs")][0] == str(ckpts[-1])
    [info] = R.list_runs(tmp_path / "runs")
    assert info.state == "done" and info.n_checkpoints == 2


def tiny_finetune_argv(run_dir, *extra):
    return ["finetune", "--run-dir", str(run_dir), "--init", "scratch", "--model-overrides", TINY, "--dataset",
            str(FIXTURES / "tiny_labels.csv"), "--max-seq-len", "16", "--batch-size", "8", "--max-steps", "6",
            "--log-every", "1", "--eval-every", "3", "--save-every", "3", "--lock", "none", "--device", "cpu",
            "--lr", "1e-3", "--no-baseline", *extra]


@pytest.mark.parametrize("make_argv", [tiny_pretrain_argv, tiny_finetune_argv], ids=["pretrain", "finetune"])
def test_resume_equals_uninterrupted_with_dropout(tmp_path, make_argv):
    """Dropout 0.3, so a resume that did not restore the RNG state would differ (checked by hand:
    removing ``torch.set_rng_state`` in the loop's resume makes this fail)."""
    full, state = run_trainer(make_argv(tmp_path / "full", "--dropout", "0.3"))
    assert state == "done"

    holder = {}

    def stop_at_4(record):  # what SIGTERM does: the loop sees the flag after the step
        if record["split"] == "train" and record["step"] == 4:
            holder["t"].stop.set = True

    argv = make_argv(tmp_path / "cut", "--dropout", "0.3")
    t = Trainer(to_config(parse_args(argv)), tmp_path / "cut", argv, on_event=[stop_at_4], install_signals=False)
    holder["t"] = t
    assert t.run() == "cancelled"
    status = R.read_status(tmp_path / "cut")
    assert status["state"] == "cancelled" and 4 <= status["step"] < 6  # the flag is seen after the next step
    assert R.last_checkpoint(tmp_path / "cut").name == f"step-{status['step']:06d}"  # saved on the way out

    resumed, state = run_trainer(["resume", "--run-dir", str(tmp_path / "cut"), "--lock", "none"])
    assert state == "done" and resumed.step == 6
    a, b = full.model.state_dict(), resumed.model.state_dict()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-6, msg=k)
    m_full = [(r["step"], r["loss"]) for r in R.read_metrics(tmp_path / "full", "train")]
    m_cut = [(r["step"], r["loss"]) for r in R.read_metrics(tmp_path / "cut", "train")]
    assert [s for s, _ in m_cut] == [1, 2, 3, 4, 5, 6]
    for (s1, l1), (s2, l2) in zip(m_full, m_cut):
        assert s1 == s2 and l1 == pytest.approx(l2, abs=1e-5)


def test_tiny_finetune_run_with_baseline(tmp_path):
    run = tmp_path / "ft"
    argv = ["finetune", "--run-dir", str(run), "--init", "scratch", "--model-overrides", TINY, "--dataset",
            str(FIXTURES / "tiny_labels.csv"), "--max-seq-len", "16", "--batch-size", "16", "--max-steps", "8",
            "--log-every", "2", "--eval-every", "4", "--save-every", "100", "--lock", "none", "--device", "cpu",
            "--lr", "1e-3", "--pre-layer-norm", "--group-by-length", "--head-lr", "2e-2"]
    trainer, state = run_trainer(argv)
    assert state == "done"
    rates = {g["lr_scale"]: g["lr"] for g in trainer.optimizer.param_groups}  # the last step's, by the loop
    assert rates[20.0] == pytest.approx(20 * rates[1.0]) and rates[1.0] == R.read_metrics(run, "train")[-1]["lr"] > 0
    res = R.read_results(run)
    assert res["labels"] == ["negative", "positive"]
    assert res["test"]["n"] == 8 and 0 <= res["test"]["acc"] <= 1 and "f1" in res["test"]
    assert sum(map(sum, res["confusion_matrix"])) == 8
    assert "precision" in res["classification_report"]["negative"]
    assert 0 <= res["baseline"]["acc"] <= 1 and res["baseline"]["train_examples"] == 64
    val = R.read_metrics(run, "val")
    assert {"loss", "acc", "f1"} <= set(val[-1])
    loaded = sources.load(sources.ModelSource("run", str(R.last_checkpoint(run))))
    assert loaded.head == "classification" and loaded.config.id2label == {0: "negative", 1: "positive"}
    assert loaded.config.pre_layer_norm


def test_config_file_and_flags(tmp_path):
    cfg = tmp_path / "opts.json"
    cfg.write_text(json.dumps({"max_steps": 11, "batch_size": 4, "corpus": "x.txt"}))
    ns = parse_args(["pretrain", "--config", str(cfg), "--batch-size", "2"])
    assert (ns.max_steps, ns.batch_size, ns.corpus) == (11, 2, "x.txt")  # flags win over the file
    cfg.write_text(json.dumps({"nonsense": 1}))
    with pytest.raises(SystemExit):
        parse_args(["pretrain", "--config", str(cfg)])


def test_continued_pretraining_from_packaged_gets_fresh_heads():
    from bertcore.training.models import build_model

    ns = parse_args(["pretrain", "--init", "packaged", "--max-seq-len", "64"])
    model, tok, origin = build_model(to_config(ns))
    assert isinstance(model, BertForPreTraining) and model.config.hidden_size == 384
    assert any(k.startswith("cls.predictions") for k in model.load_report.missing)
    assert "cls.seq_relationship.weight" in model.load_report.missing
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight  # tied


def test_fine_tuning_follows_the_pooling_the_starting_model_declares(tmp_path):
    """--pooling auto: the packaged all-MiniLM-L6-v2 declares mean pooling (1_Pooling), so its classifier
    reads the mean of the tokens; the shipped MiniLM-MLM declares none and keeps [CLS]; --pooling and
    --model-overrides choose."""
    import shutil

    from bertcore.loading.sources import declared_pooling, packaged_model_dir, shipped_mlm_dir
    from bertcore.training.models import build_model

    def pooling(*flags):
        cfg = to_config(parse_args(["finetune", *flags]))
        return build_model(cfg, labels=["neg", "pos"])[0].config.classifier_pooling

    assert declared_pooling(packaged_model_dir()) == "mean" and declared_pooling(shipped_mlm_dir()) is None
    assert pooling() == "mean"
    assert pooling("--pooling", "cls") == "cls"
    assert pooling("--model-overrides", '{"classifier_pooling": "cls"}') == "cls"
    assert pooling("--init", str(shipped_mlm_dir())) == "cls"
    assert pooling("--init", str(shipped_mlm_dir()), "--pooling", "mean") == "mean"
    assert pooling("--init", "scratch", "--pooling", "mean", "--model-overrides", TINY) == "mean"
    folder = shutil.copytree(packaged_model_dir() / "1_Pooling", tmp_path / "1_Pooling")
    (tmp_path / "modules.json").write_text(json.dumps([{"path": "1_Pooling", "type": "x.models.Pooling"}]))
    assert declared_pooling(tmp_path) == "mean"
    flags = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**flags, "pooling_mode_max_tokens": True}))
    assert declared_pooling(tmp_path) is None  # mean and max at once: no head here computes that
    (folder / "config.json").write_text(json.dumps({**flags, "pooling_mode_mean_tokens": False,
                                                    "pooling_mode_cls_token": True}))
    assert declared_pooling(tmp_path) == "cls"
    (tmp_path / "modules.json").write_text("[{not json")
    assert declared_pooling(tmp_path) is None


def test_bad_options_fail_with_a_message(tmp_path):
    run = tmp_path / "bad"
    _, state = run_trainer(tiny_pretrain_argv(run, "--corpus", str(tmp_path / "missing.txt")))
    assert state == "failed"
    assert "unknown corpus" in R.read_status(run)["error"]


# ----------------------------------------------------------------------------- metrics, time budget, knobs
def test_per_corruption_accuracy_on_a_constructed_case():
    """4 selected positions: [MASK] right, [MASK] wrong (but 2nd best), random right, unchanged right."""
    from types import SimpleNamespace

    from bertcore.tokenization.masking import MASKED, RANDOM, UNCHANGED
    from bertcore.runs.config import TrainConfig
    from bertcore.training.tasks import PretrainTask

    task = PretrainTask(TrainConfig.create("pretrain"))
    labels = torch.tensor([[-100, 5, 6, -100, 7, 8]])
    decision = torch.tensor([[0, MASKED, MASKED, 0, RANDOM, UNCHANGED]], dtype=torch.uint8)
    logits = torch.zeros(4, 10)
    logits[0, 5] = 9  # right
    logits[1, 2], logits[1, 6] = 9, 8  # wrong, but in the top 5
    logits[2, 7] = 9
    logits[3, 8] = 9
    out = SimpleNamespace(mlm_labels=torch.tensor([5, 6, 7, 8]), prediction_logits=logits,
                          mlm_loss=torch.tensor(1.0), nsp_loss=torch.tensor(0.5),
                          seq_relationship_logits=torch.tensor([[2.0, 0.0]]))
    batch = {"labels": labels, "decision": decision, "next_sentence_label": torch.tensor([1]),
             "attention_mask": torch.ones(1, 6, dtype=torch.long)}
    m = task.summarize(task.batch_stats(out, batch))
    assert m["mlm_acc"] == 0.75 and m["mlm_acc_mask"] == 0.5 and m["mlm_top5_mask"] == 1.0
    assert m["mlm_acc_random"] == 1.0 and m["mlm_acc_unchanged"] == 1.0 and m["nsp_acc"] == 0.0
    assert m["loss"] == pytest.approx(1.5)


def test_unigram_reference_is_the_entropy_of_maskable_tokens():
    ref = D.unigram_reference([[101, 7, 7, 8, 102], [101, 9, 7, 102]], special_ids=[101, 102])
    p = torch.tensor([3 / 5, 1 / 5, 1 / 5])
    assert ref["unigram_loss"] == pytest.approx(float(-(p * p.log()).sum()))
    assert ref["most_frequent_token_rate"] == pytest.approx(0.6) and ref["most_frequent_token_id"] == 7
    assert ref["maskable_tokens"] == 5


def test_lr_schedule_by_time_is_spread_over_the_budget():
    from bertcore.training.optim import lr_at_time

    assert lr_at_time(0, 100, 1.0, 0.1) == pytest.approx(1e-3)
    assert lr_at_time(5, 100, 1.0, 0.1) == pytest.approx(0.5)
    assert lr_at_time(10, 100, 1.0, 0.1) == pytest.approx(1.0)
    assert lr_at_time(55, 100, 1.0, 0.1) == pytest.approx(0.5)
    assert lr_at_time(100, 100, 1.0, 0.1) == 0.0 and lr_at_time(150, 100, 1.0, 0.1) == 0.0
    assert lr_at_time(50, 100, 1.0, 4, step=1) == pytest.approx(0.5 * 0.5)  # step warmup x time decay


def test_shorten_pair_keeps_the_boundary():
    row = {"input_ids": [101, 1, 2, 3, 4, 102, 5, 6, 7, 102], "token_type_ids": [0] * 6 + [1] * 4,
           "next_sentence_label": 1}
    short = D.shorten_pair(row, 7)
    assert short["input_ids"] == [101, 3, 4, 102, 5, 6, 102] and short["token_type_ids"] == [0] * 4 + [1] * 3
    assert short["next_sentence_label"] == 1 and D.shorten_pair(row, 10) is row


def test_knobs_no_nsp_corruption_split_length_schedule_early_checkpoints_tensorboard(tmp_path):
    run = tmp_path / "knobs"
    _, state = run_trainer(tiny_pretrain_argv(run, "--no-nsp", "--mask-replace-prob", "1.0", "--random-replace-prob",
                                              "0", "--short-seq-len", "16", "--short-seq-fraction", "0.5",
                                              "--save-steps", "0,2", "--keep-checkpoints", "1", "--tensorboard"))
    assert state == "done"
    train = R.read_metrics(run, "train")
    assert [r["seq_len"] for r in train] == [16, 16, 16, 32, 32, 32]
    assert all("nsp_acc" not in r and "mlm_acc_random" not in r and "mlm_acc_unchanged" not in r for r in train)
    assert all(r["mlm_acc"] == r["mlm_acc_mask"] for r in train)  # 100% [MASK]: the mix is the [MASK] accuracy
    assert R.read_config(run)["data"]["notnext_fraction"] == 0.0
    assert [c.name for c in R.checkpoints(run)] == ["step-000000", "step-000002", "step-000006"]  # 0, 2 never pruned
    [ref] = R.read_metrics(run, "reference")
    assert 0 < ref["most_frequent_token_rate"] < 1 and ref["unigram_loss"] > 0
    assert R.read_config(run)["reference"]["unigram_loss"] == ref["unigram_loss"]
    assert list((run / "tensorboard").glob("events.out.tfevents.*"))


def test_time_budget_ends_the_run_with_a_final_evaluation_and_checkpoint(tmp_path):
    """--budget-schedule time (Cramming): the lr follows elapsed time and the budget ends the run (the default
    step schedule, calibrated: tests/test_calibration.py)."""
    run = tmp_path / "timed"
    argv = [a for a in tiny_pretrain_argv(run) if a not in ("--max-steps", "6")]
    trainer, state = run_trainer(argv + ["--max-time", "0.05", "--eval-every", "100000", "--save-every", "100000",
                                         "--budget-schedule", "time"])
    assert state == "done"
    status = R.read_status(run)
    assert status["total_steps"] is None and status["time_budget_s"] == pytest.approx(3.0)
    assert status["elapsed_s"] >= 3.0 and trainer.step < 10**6
    last_train = R.read_metrics(run, "train")[-1]
    assert last_train["step"] == trainer.step and last_train["time"] >= 3.0
    assert [r["step"] for r in R.read_metrics(run, "val")] == [0, trainer.step]  # the final evaluation
    assert R.last_checkpoint(run).name == f"step-{trainer.step:06d}"  # the final checkpoint
    assert last_train["lr"] < 3e-3 * 0.5  # the schedule decayed with the time spent


def test_epochs_save_every_s_and_grad_clip_options(tmp_path):
    """--epochs sets the length from the training split, --save-every-s checkpoints by time (here at
    every step), --grad-clip 0 turns clipping (and its logged norm) off."""
    run = tmp_path / "ep"
    argv = [a for a in tiny_pretrain_argv(run) if a not in ("--max-steps", "6")]
    trainer, state = run_trainer(argv + ["--epochs", "1", "--save-every-s", "0.000001", "--save-every", "1000",
                                         "--keep-checkpoints", "0", "--grad-clip", "0"])
    assert state == "done"
    per_epoch = len(trainer.task.train_ds) // 8
    assert trainer.total_steps == per_epoch == R.read_status(run)["total_steps"]
    assert [R.checkpoint_step(c) for c in R.checkpoints(run)] == list(range(1, per_epoch + 1))
    assert all("grad_norm" not in r for r in R.read_metrics(run, "train"))


def test_data_seed_gives_new_batches_and_keeps_the_validation_set(tmp_path):
    """A continued stage with ``--data-seed`` must not replay the last stage's batches and masks (the
    shipped model's stages 2-4 all saw the same first batches before this option), while the
    train/validation split, and so the validation numbers of the same weights, stay as they were."""
    runs = {}
    for name, extra in (("seed0", ()), ("data1", ("--data-seed", "1"))):
        run = tmp_path / "runs" / name
        _, state = run_trainer(tiny_pretrain_argv(run, "--max-steps", "2", *extra))
        assert state == "done"
        runs[name] = (R.read_metrics(run, "train"), R.read_metrics(run, "val"), R.read_config(run))
    (train0, val0, cfg0), (train1, val1, cfg1) = runs["seed0"], runs["data1"]
    assert train1[0]["loss"] != train0[0]["loss"]  # same initial weights, other batch
    assert val1[0]["loss"] == val0[0]["loss"]  # step 0: same weights, same validation pairs and masks
    assert cfg1["data"]["val_pairs"] == cfg0["data"]["val_pairs"] and cfg1["args"]["data_seed"] == 1


def test_unigram_and_sinusoidal_init_of_a_new_model(tmp_path):
    """--unigram-init: the first MLM loss is the unigram loss (not ln V); --position-init sinusoidal: the table
    is the scaled sinusoid. Neither touches a resumed model."""
    from bertcore.readouts.positional import sinusoidal

    argv = tiny_pretrain_argv(tmp_path / "u", "--unigram-init", "--position-init", "sinusoidal", "--max-steps", "1",
                              "--save-every", "100", "--eval-batches", "0")
    t = Trainer(to_config(parse_args(argv)), tmp_path / "u", argv, install_signals=False)
    t.setup()
    bias = t.model.cls.predictions.bias.detach()
    probs = torch.softmax(bias, 0)
    ids = [i for s in t.task.data.train["input_ids"] for i in s]
    most = max(set(ids), key=ids.count)
    assert int(bias.argmax()) == most
    assert float(probs[most]) == pytest.approx(ids.count(most) / len(ids), rel=2e-3)  # 0.1% smoothing
    table = t.model.bert.embeddings.position_embeddings.weight.detach().numpy()
    np.testing.assert_allclose(table, sinusoidal(*table.shape) * 0.02 * 2 ** 0.5, rtol=1e-5, atol=1e-7)
    train = t.evaluate(t.task.train_ds, 0)  # on the tokens it counted: the unigram loss, not ln V (10.3)
    assert train["mlm_loss"] == pytest.approx(t.task.reference["unigram_loss"], abs=0.5)

    plain = Trainer(to_config(parse_args(tiny_pretrain_argv(tmp_path / "p"))), tmp_path / "p", [],
                    install_signals=False)
    plain.setup()
    assert float(plain.model.cls.predictions.bias.detach().abs().max()) == 0.0  # the default: untouched
